//! Stacks of cubic-polynomial, cubic-rational, sinh and affine layers
//! evaluated for [`LANES`] samples at once.
//!
//! [`Stack`](super::Stack)'s `_lanes` passes run several chains in lockstep,
//! one layer at a time, but each lane still calls its own layer through the
//! [`Scalar`] enum. Here a stack whose layers are all of the cubic, the
//! cubic-rational, the sinh or the affine family is packed column-wise:
//! every parameter of layer `k` becomes an array with one entry per lane, and
//! each layer is one straight-line loop over the lanes (no branches, no
//! calls), which the compiler turns into vector instructions (SSE natively,
//! AVX2 where the processor has it, WebAssembly's simd128 in the browser).
//!
//! A chain is a long run of dependent operations (each layer a square root,
//! a division and a few Newton steps on the last layer's output), so its
//! speed is set by how many independent chains the processor can overlap,
//! not by the width of one vector: against 16 lanes on SSE, 32 lanes (eight
//! SSE or four AVX2 vectors in flight) ran the Fourier recipe's training step
//! 20 % faster on SSE and 35 % faster on AVX2; 64 ran slower (spilled out of
//! the registers and the first cache).
//! The passes run inside [`crate::real::on_avx2`], so everything they call
//! is always inlined.
//!
//! For the cubic, cubic-rational and affine families the arithmetic is the
//! scalar family's, operation for operation: where the
//! cubic's closed-form inverse leaves its range (a huge argument, NaN) a lane
//! falls back to the scalar rule, and the cubic rational's inverse (a root of
//! a cubic equation by cases) is the scalar rule lane by lane, so the results
//! are the scalar ones to the last bit. The sinh family's transcendental
//! functions run as vector loops ([`Real::exp_m1_in_place`],
//! [`Real::ln_1p_in_place`]), so its lanes agree with the scalar rule to
//! float32 rounding, not to the bit; a lane far out (|(x - c) / s| >= 20, or
//! an argument of asinh beyond 1e15) takes the scalar rule.
//!
//! Traces, raw parameters and raw adjoints are lane-inner: row `k` (a layer,
//! or a raw value) holds one value per lane, `[k * LANES + lane]`, so a layer
//! reads and writes them as whole vectors. (The `_lanes` passes are
//! lane-major, `[lane * K + k]`; [`to_lane_inner`], [`to_lane_major`] and
//! [`add_lane_major`] convert where a caller mixes both.)

use super::affine::Affine;
use super::cubic::{Cubic, sinh_third};
use super::cubic_rational::CubicRational;
use super::sinh::Sinh;
use super::{Family, LogSlopeSum, Scalar, Slope, Stack};
use crate::real::Real;

/// Samples evaluated together (see the module's notes for why 32). More
/// than 32 would also need another [`from_fn`]: the standard library's
/// `Default` for arrays, which it takes for rows of lanes, stops at 32.
pub const LANES: usize = 32;

/// One value per lane.
type Lanes<T> = [T; LANES];

/// `lane_major` (`lanes` rows of `width`) into `lane_inner` (`width` rows of
/// [`LANES`]), the padding lanes of each row left as they were.
pub fn to_lane_inner<T: Copy>(lane_major: &[T], lanes: usize, width: usize, lane_inner: &mut [T]) {
    for (lane, values) in lane_major.chunks_exact(width).take(lanes).enumerate() {
        for (j, &v) in values.iter().enumerate() {
            lane_inner[j * LANES + lane] = v;
        }
    }
}

/// The first `lanes` lanes of `lane_inner` (`width` rows of [`LANES`]) into
/// `lane_major` (`lanes` rows of `width`).
pub fn to_lane_major<T: Copy>(lane_inner: &[T], lanes: usize, width: usize, lane_major: &mut [T]) {
    for (lane, values) in lane_major.chunks_exact_mut(width).take(lanes).enumerate() {
        for (j, v) in values.iter_mut().enumerate() {
            *v = lane_inner[j * LANES + lane];
        }
    }
}

/// Adds the first `lanes` lanes of `lane_inner` (`width` rows of [`LANES`])
/// into `lane_major` (`lanes` rows of `width`).
pub fn add_lane_major<T: Real>(lane_inner: &[T], lanes: usize, width: usize, lane_major: &mut [T]) {
    for (lane, values) in lane_major.chunks_exact_mut(width).take(lanes).enumerate() {
        for (j, v) in values.iter_mut().enumerate() {
            *v += lane_inner[j * LANES + lane];
        }
    }
}

/// `std::array::from_fn`, always inlined: the lane kernels run inside
/// functions compiled for wider vectors (see [`crate::real::on_avx2`]), and
/// a helper left outside them would run on the build's own. One loop over
/// all `N` from a filled array: starting from `f(0)` and looping from 1 made
/// the Fourier recipe's step a third slower.
#[inline(always)]
fn from_fn<V: Copy + Default, const N: usize>(mut f: impl FnMut(usize) -> V) -> [V; N] {
    let mut out = [V::default(); N];
    for (i, v) in out.iter_mut().enumerate() {
        *v = f(i);
    }
    out
}

/// `v.min(hi)` (`hi` for NaN) as a comparison and a select: WebAssembly's
/// `min` treats NaN otherwise, so `min` there is a library call, and a call
/// keeps the compiler from turning a lane loop into vector instructions.
#[inline(always)]
fn below<T: Real>(v: T, hi: T) -> T {
    if v < hi { v } else { hi }
}

/// `v.max(lo).min(hi)` (`lo` for NaN) by comparisons and selects (see [`below`]).
#[inline(always)]
fn between<T: Real>(v: T, lo: T, hi: T) -> T {
    below(if v > lo { v } else { lo }, hi)
}

/// `layer(lane)` for every lane, when each lane has one (a packed layer
/// takes every lane's layer of one family).
fn column<L: Copy>(layer: impl Fn(usize) -> Option<L>) -> Option<Lanes<L>> {
    let mut layers = [layer(0)?; LANES];
    for (i, slot) in layers.iter_mut().enumerate().skip(1) {
        *slot = layer(i)?;
    }
    Some(layers)
}

/// Raw parameters of one cubic layer.
const CUBIC_RAW: usize = 4;

/// Raw parameters of one cubic-rational layer.
const RATIONAL_RAW: usize = 3;

/// Raw parameters of one affine layer.
const AFFINE_RAW: usize = 2;

/// Raw parameters of one sinh layer.
const SINH_RAW: usize = 5;

/// The most raw parameters a packed layer has.
const MAX_RAW: usize = SINH_RAW;

/// Where a sinh lane leaves the vector path: |(x - c) / s| at or beyond this
/// (the scalar rule's own split), or asinh's argument beyond [`SINH_Z_RANGE`].
const SINH_A_RANGE: f64 = 20.0;

/// The largest asinh argument the vector path takes (its square stays finite
/// in float32).
const SINH_Z_RANGE: f64 = 1e15;

/// Where the closed-form inverse's hyperbolic form needs no care (as the scalar rule).
const G_INV_RANGE: f64 = 1e15;

/// One cubic layer's constants, one column per lane.
#[derive(Clone, Copy, Debug)]
struct CubicLanes<T> {
    a: Lanes<T>,
    b: Lanes<T>,
    beta: Lanes<T>,
    c: Lanes<T>,
    da_draw: Lanes<T>,
    db_draw: Lanes<T>,
    inv_scale: Lanes<T>,
    inv_arg: Lanes<T>,
}

/// The derivatives of one layer at each lane's point: a layer's
/// `partials_at` writes the rows of its own raw values, and a row past them
/// keeps what an earlier layer left there (nothing reads it). One is reused
/// for every layer of a reverse pass, so it is not cleared for each.
struct PartialsLanes<T> {
    f_raw: [Lanes<T>; MAX_RAW],
    logd_raw: [Lanes<T>; MAX_RAW],
    f_x: Lanes<T>,
    logd_x: Lanes<T>,
}

impl<T: Real> PartialsLanes<T> {
    #[inline(always)]
    fn zero() -> Self {
        let zero = [T::zero(); LANES];
        Self {
            f_raw: [zero; MAX_RAW],
            logd_raw: [zero; MAX_RAW],
            f_x: zero,
            logd_x: zero,
        }
    }
}

impl<T: Real> CubicLanes<T> {
    #[inline(always)]
    fn new(scalar: Lanes<Cubic<T>>) -> Self {
        let column = |f: fn(&Cubic<T>) -> T| from_fn(|i| f(&scalar[i]));
        Self {
            a: column(|c| c.a),
            b: column(|c| c.b),
            beta: column(|c| c.beta),
            c: column(|c| c.c),
            da_draw: column(|c| c.da_draw),
            db_draw: column(|c| c.db_draw),
            inv_scale: column(|c| c.inv_scale),
            inv_arg: column(|c| c.inv_arg),
        }
    }

    /// [`Cubic::from_raw`] per lane (`raw[j][lane]`: raw value j of each lane).
    #[inline(always)]
    fn from_raw(raw: &[Lanes<T>; CUBIC_RAW]) -> Self {
        let (one, two) = (T::one(), T::c(2.0));
        // the bounded scales of a and b, both columns in one pass:
        // v = exp(2 tanh(raw / 2)), tanh from e = exp(-|raw|)
        let scale_raw: [T; 2 * LANES] = from_fn(|i| raw[i / LANES][i % LANES]);
        let mut e = scale_raw.map(|r| -r.abs());
        T::exp_in_place(&mut e);
        let th: [T; 2 * LANES] =
            from_fn(|i| scale_raw[i].sign_nonneg() * (one - e[i]) / (one + e[i]));
        let mut root = th;
        T::exp_in_place(&mut root);
        let v: [T; 2 * LANES] = from_fn(|i| root[i] * root[i]);
        let dv: [T; 2 * LANES] = from_fn(|i| v[i] * (one - th[i] * th[i]));
        let sqrt3 = T::c(3f64.sqrt());
        let (sa, sb) = (&root[..LANES], &root[LANES..]);
        Self {
            a: from_fn(|i| v[i]),
            b: from_fn(|i| v[LANES + i]),
            beta: raw[2],
            c: raw[3],
            da_draw: from_fn(|i| dv[i]),
            db_draw: from_fn(|i| dv[LANES + i]),
            inv_scale: from_fn(|i| two * sa[i] / (sqrt3 * sb[i])),
            inv_arg: from_fn(|i| T::c(1.5) * sqrt3 * sb[i] / (v[i] * sa[i])),
        }
    }

    /// Lane `i`'s layer.
    fn lane(&self, i: usize) -> Cubic<T> {
        Cubic {
            a: self.a[i],
            b: self.b[i],
            beta: self.beta[i],
            c: self.c[i],
            da_draw: self.da_draw[i],
            db_draw: self.db_draw[i],
            inv_scale: self.inv_scale[i],
            inv_arg: self.inv_arg[i],
        }
    }

    /// `g(v) = a v + b v^3` per lane.
    #[inline(always)]
    fn g(&self, v: &Lanes<T>) -> Lanes<T> {
        from_fn(|i| v[i] * (self.a[i] + self.b[i] * v[i] * v[i]))
    }

    /// `g'(v)` per lane.
    #[inline(always)]
    fn g_prime(&self, v: &Lanes<T>) -> Lanes<T> {
        from_fn(|i| self.a[i] + T::c(3.0) * self.b[i] * v[i] * v[i])
    }

    /// `g^-1(w)` per lane: [`Cubic`]'s hyperbolic closed form without branches,
    /// then the scalar rule for the lanes outside its range.
    #[inline(always)]
    fn g_inv(&self, w: &Lanes<T>) -> Lanes<T> {
        let range = T::c(G_INV_RANGE);
        let t: Lanes<T> = from_fn(|i| (self.inv_arg[i] * w[i]).abs());
        let mut out: Lanes<T> =
            from_fn(|i| self.inv_scale[i] * w[i].sign_nonneg() * sinh_third(below(t[i], range)));
        // one vector test, then lane by lane only when some lane is out of range
        if !t.iter().fold(true, |inside, &t| inside & (t < range)) {
            for i in 0..LANES {
                if t[i] >= range || t[i].is_nan() {
                    out[i] = self.lane(i).g_inv(w[i]);
                }
            }
        }
        out
    }

    /// `f(x)` per lane.
    #[inline(always)]
    fn x_from_z_value(&self, x: &Lanes<T>) -> Lanes<T> {
        let u: Lanes<T> = from_fn(|i| x[i] - self.c[i]);
        let g = self.g(&u);
        let w = from_fn(|i| g[i] + self.beta[i]);
        let v = self.g_inv(&w);
        from_fn(|i| self.c[i] + v[i])
    }

    /// `(f(x), f'(x))` per lane.
    #[inline(always)]
    fn x_from_z_ratio(&self, x: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let u: Lanes<T> = from_fn(|i| x[i] - self.c[i]);
        let g = self.g(&u);
        let w = from_fn(|i| g[i] + self.beta[i]);
        let v = self.g_inv(&w);
        let (gu, gv) = (self.g_prime(&u), self.g_prime(&v));
        (from_fn(|i| self.c[i] + v[i]), from_fn(|i| gu[i] / gv[i]))
    }

    /// `(f^-1(y), f'(f^-1(y)))` per lane.
    #[inline(always)]
    fn z_from_x_ratio(&self, y: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let v: Lanes<T> = from_fn(|i| y[i] - self.c[i]);
        let g = self.g(&v);
        let w = from_fn(|i| g[i] - self.beta[i]);
        let u = self.g_inv(&w);
        let (gu, gv) = (self.g_prime(&u), self.g_prime(&v));
        (from_fn(|i| self.c[i] + u[i]), from_fn(|i| gu[i] / gv[i]))
    }

    /// [`Cubic::partials_at`] per lane: at `x`, given `y = f(x)`.
    #[inline(always)]
    fn partials_at(&self, x: &Lanes<T>, y: &Lanes<T>, p: &mut PartialsLanes<T>) {
        let u: Lanes<T> = from_fn(|i| x[i] - self.c[i]);
        let v: Lanes<T> = from_fn(|i| y[i] - self.c[i]);
        let (gu, gv) = (self.g_prime(&u), self.g_prime(&v));
        let one = T::one();
        for i in 0..LANES {
            let (b, u, v, gu) = (self.b[i], u[i], v[i], gu[i]);
            let inv_gv = one / gv[i];
            let fp = gu * inv_gv;
            let d = u - v;
            let v_a = d * inv_gv;
            let v_b = d * (u * u + u * v + v * v) * inv_gv;
            let v_beta = inv_gv;
            let six_b = T::c(6.0) * b;
            let inv_gu = one / gu;
            let logd_x = six_b * u * inv_gu - six_b * v * inv_gv * fp;
            let logd_a = inv_gu - (one + six_b * v * v_a) * inv_gv;
            let logd_b =
                T::c(3.0) * u * u * inv_gu - (T::c(3.0) * v * v + six_b * v * v_b) * inv_gv;
            let logd_beta = -six_b * v * v_beta * inv_gv;
            p.f_raw[0][i] = v_a * self.da_draw[i];
            p.f_raw[1][i] = v_b * self.db_draw[i];
            p.f_raw[2][i] = v_beta;
            p.f_raw[3][i] = one - fp;
            p.logd_raw[0][i] = logd_a * self.da_draw[i];
            p.logd_raw[1][i] = logd_b * self.db_draw[i];
            p.logd_raw[2][i] = logd_beta;
            p.logd_raw[3][i] = -logd_x;
            p.f_x[i] = fp;
            p.logd_x[i] = logd_x;
        }
    }
}

/// One cubic-rational layer's constants, one column per lane.
#[derive(Clone, Copy, Debug)]
struct RationalLanes<T> {
    alpha: Lanes<T>,
    beta: Lanes<T>,
    c: Lanes<T>,
    dalpha_draw: Lanes<T>,
    dbeta_draw: Lanes<T>,
}

impl<T: Real> RationalLanes<T> {
    #[inline(always)]
    fn new(scalar: Lanes<CubicRational<T>>) -> Self {
        let parts = scalar.map(|layer| layer.parts());
        let column = |j: usize| from_fn(|i| parts[i][j]);
        Self {
            alpha: column(0),
            beta: column(1),
            c: column(2),
            dalpha_draw: column(3),
            dbeta_draw: column(4),
        }
    }

    /// Lane `i`'s layer.
    fn lane(&self, i: usize) -> CubicRational<T> {
        CubicRational::from_parts([
            self.alpha[i],
            self.beta[i],
            self.c[i],
            self.dalpha_draw[i],
            self.dbeta_draw[i],
        ])
    }

    /// `(f(x), f'(x))` per lane ([`CubicRational::x_from_z_ratio`]).
    #[inline(always)]
    fn x_from_z_ratio(&self, x: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let one = T::one();
        let u: Lanes<T> = from_fn(|i| x[i] - self.c[i]);
        let bu2: Lanes<T> = from_fn(|i| self.beta[i] * u[i] * u[i]);
        let d: Lanes<T> = from_fn(|i| one + bu2[i]);
        (
            from_fn(|i| x[i] + self.alpha[i] * u[i] / d[i]),
            from_fn(|i| one + self.alpha[i] * (one - bu2[i]) / (d[i] * d[i])),
        )
    }

    /// `(f^-1(y), f'(f^-1(y)))` per lane: the root lane by lane, the slope
    /// packed.
    #[inline(always)]
    fn z_from_x_ratio(&self, y: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let x: Lanes<T> = from_fn(|i| self.lane(i).solve_centred(y[i] - self.c[i]) + self.c[i]);
        let (_, ratio) = self.x_from_z_ratio(&x);
        (x, ratio)
    }

    /// [`CubicRational::partials`] per lane, at `x`.
    #[inline(always)]
    fn partials_at(&self, x: &Lanes<T>, p: &mut PartialsLanes<T>) {
        let (one, two, three) = (T::one(), T::c(2.0), T::c(3.0));
        for (i, &xi) in x.iter().enumerate() {
            let (alpha, beta) = (self.alpha[i], self.beta[i]);
            let u = xi - self.c[i];
            let u2 = u * u;
            let bu2 = beta * u2;
            let d = one + bu2;
            let d2 = d * d;
            let d3 = d2 * d;
            let n = one - bu2;
            let fp = one + alpha * n / d2;
            let three_m = three - bu2;
            let fpp = -two * alpha * beta * u * three_m / d3;
            let inv_fp = one / fp;
            let f_alpha = u / d;
            let f_beta = -alpha * u2 * u / d2;
            let fp_alpha = n / d2;
            let fp_beta = -alpha * u2 * three_m / d3;
            p.f_raw[0][i] = f_alpha * self.dalpha_draw[i];
            p.f_raw[1][i] = f_beta * self.dbeta_draw[i];
            p.f_raw[2][i] = one - fp;
            p.logd_raw[0][i] = fp_alpha * inv_fp * self.dalpha_draw[i];
            p.logd_raw[1][i] = fp_beta * inv_fp * self.dbeta_draw[i];
            p.logd_raw[2][i] = -fpp * inv_fp;
            p.f_x[i] = fp;
            p.logd_x[i] = fpp * inv_fp;
        }
    }
}

/// One sinh layer's constants, one column per lane, with the exponentials of
/// mu and nu both ways (the inverse is the map with (-beta, -nu, -mu)).
#[derive(Clone, Copy, Debug)]
struct SinhLanes<T> {
    s: Lanes<T>,
    beta: Lanes<T>,
    c: Lanes<T>,
    mu: Lanes<T>,
    nu: Lanes<T>,
    ds_draw: Lanes<T>,
    dmu_draw: Lanes<T>,
    dnu_draw: Lanes<T>,
    e_mu: Lanes<T>,
    e_nu: Lanes<T>,
    e_neg_mu: Lanes<T>,
    e_neg_nu: Lanes<T>,
}

/// One sinh evaluation per lane (see [`SinhLanes::eval`]).
struct SinhEval<T> {
    a: Lanes<T>,
    /// asinh's argument
    z: Lanes<T>,
    /// asinh(z)
    big_a: Lanes<T>,
    /// log f'
    logd: Lanes<T>,
    /// tanh a
    th_a: Lanes<T>,
    /// lanes the vector path does not cover
    far: [bool; LANES],
}

impl<T: Real> SinhLanes<T> {
    #[inline(always)]
    fn new(scalar: Lanes<Sinh<T>>) -> Self {
        let parts = scalar.map(|layer| layer.parts());
        let column = |j: usize| from_fn(|i| parts[i][j]);
        let (mu, nu): (Lanes<T>, Lanes<T>) = (column(3), column(4));
        let mut e: [T; 4 * LANES] = from_fn(|i| match i / LANES {
            0 => mu[i % LANES],
            1 => nu[i % LANES],
            2 => -mu[i % LANES],
            _ => -nu[i % LANES],
        });
        T::exp_in_place(&mut e);
        let part = |k: usize| from_fn(|i| e[k * LANES + i]);
        Self {
            s: column(0),
            beta: column(1),
            c: column(2),
            mu,
            nu,
            ds_draw: column(5),
            dmu_draw: column(6),
            dnu_draw: column(7),
            e_mu: part(0),
            e_nu: part(1),
            e_neg_mu: part(2),
            e_neg_nu: part(3),
        }
    }

    /// Lane `i`'s layer.
    fn lane(&self, i: usize) -> Sinh<T> {
        Sinh::from_parts([
            self.s[i],
            self.beta[i],
            self.c[i],
            self.mu[i],
            self.nu[i],
            self.ds_draw[i],
            self.dmu_draw[i],
            self.dnu_draw[i],
        ])
    }

    /// The map at `x` per lane, forward (beta, mu, nu) or inverse (-beta, -nu,
    /// -mu): `a = (x - c) / s`, `z = e^mu (e^nu sinh a + beta)`, `A = asinh z`
    /// and `log f' = mu + nu + log cosh a - log cosh A`, where
    /// `cosh A = sqrt(1 + z^2)`. Lanes marked `far` hold no meaningful values.
    #[inline(always)]
    fn eval(&self, x: &Lanes<T>, inverse: bool) -> SinhEval<T> {
        let (one, half, ln2) = (T::one(), T::c(0.5), T::c(std::f64::consts::LN_2));
        let (a_range, z_range) = (T::c(SINH_A_RANGE), T::c(SINH_Z_RANGE));
        let a: Lanes<T> = from_fn(|i| (x[i] - self.c[i]) / self.s[i]);
        // clamped so that far lanes cannot overflow the vector loops
        let ac: Lanes<T> = a.map(|v| between(v, -a_range, a_range));
        // sinh a = (expm1(a) - expm1(-a)) / 2, accurate near 0 too
        let mut em: [T; 2 * LANES] = from_fn(|i| if i < LANES { ac[i] } else { -ac[i - LANES] });
        T::exp_m1_in_place(&mut em);
        let mut e2: Lanes<T> = ac.map(|v| T::c(-2.0) * v.abs());
        T::exp_in_place(&mut e2);
        let (beta, e_mu, e_nu) = if inverse {
            (self.beta.map(|b| -b), &self.e_neg_nu, &self.e_neg_mu)
        } else {
            (self.beta, &self.e_mu, &self.e_nu)
        };
        let sinh_a: Lanes<T> = from_fn(|i| half * (em[i] - em[LANES + i]));
        let z: Lanes<T> = from_fn(|i| e_mu[i] * (e_nu[i] * sinh_a[i] + beta[i]));
        // cosh a = 1 + (expm1(a) + expm1(-a)) / 2
        let th_a = from_fn(|i| sinh_a[i] / (one + half * (em[i] + em[LANES + i])));
        let far: [bool; LANES] = from_fn(|i| {
            let (a, z) = (a[i], z[i]);
            a.is_nan() || a.abs() >= a_range || z.is_nan() || z.abs() > z_range
        });
        let zc: Lanes<T> = z.map(|v| between(v, -z_range, z_range));
        // ln1p of: e^(-2|a|) (log cosh a), |z| + z^2 / (1 + sqrt(1 + z^2))
        // (asinh |z|) and z^2 (2 log cosh A)
        let mut l: [T; 3 * LANES] = from_fn(|i| {
            let k = i % LANES;
            let z2 = zc[k] * zc[k];
            match i / LANES {
                0 => e2[k],
                1 => zc[k].abs() + z2 / (one + (one + z2).sqrt()),
                _ => z2,
            }
        });
        T::ln_1p_in_place(&mut l);
        let big_a = from_fn(|i| zc[i].sign_nonneg() * l[LANES + i]);
        let logd = from_fn(|i| {
            let mu_nu = if inverse {
                -(self.mu[i] + self.nu[i])
            } else {
                self.mu[i] + self.nu[i]
            };
            let log_cosh_a = ac[i].abs() + l[i] - ln2;
            mu_nu + log_cosh_a - half * l[2 * LANES + i]
        });
        SinhEval {
            a,
            z,
            big_a,
            logd,
            th_a,
            far,
        }
    }

    /// `(f(x), log f'(x))` per lane ([`Sinh::x_from_z`]).
    #[inline(always)]
    fn x_from_z(&self, x: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let e = self.eval(x, false);
        let mut y: Lanes<T> = from_fn(|i| self.c[i] + self.s[i] * e.big_a[i]);
        let mut logd = e.logd;
        for i in 0..LANES {
            if e.far[i] {
                (y[i], logd[i]) = self.lane(i).x_from_z(x[i]);
            }
        }
        (y, logd)
    }

    /// `(f^-1(y), log f'(f^-1(y)))` per lane ([`Sinh::z_from_x`]).
    #[inline(always)]
    fn z_from_x(&self, y: &Lanes<T>) -> (Lanes<T>, Lanes<T>) {
        let e = self.eval(y, true);
        let mut x: Lanes<T> = from_fn(|i| self.c[i] + self.s[i] * e.big_a[i]);
        let mut logd: Lanes<T> = e.logd.map(|v| -v);
        for i in 0..LANES {
            if e.far[i] {
                (x[i], logd[i]) = self.lane(i).z_from_x(y[i]);
            }
        }
        (x, logd)
    }

    /// [`Sinh::partials`] per lane, at `x`: with `R = sqrt(1 + z^2) = cosh A`,
    /// `tanh A = z / R` and `sech A = 1 / R`.
    #[inline(always)]
    fn partials_at(&self, x: &Lanes<T>, p: &mut PartialsLanes<T>) {
        let e = self.eval(x, false);
        let mut slopes = e.logd;
        T::exp_in_place(&mut slopes);
        let one = T::one();
        for (i, &fp) in slopes.iter().enumerate() {
            let (s, a, z) = (self.s[i], e.a[i], e.z[i]);
            let inv_r = one / (one + z * z).sqrt();
            let th_big = z * inv_r;
            let emu_over_r = self.e_mu[i] * inv_r;
            let f_beta = s * emu_over_r;
            let f_mu = s * th_big;
            let f_nu = f_mu - self.beta[i] * f_beta;
            let f_s = e.big_a[i] - a * fp;
            let logd_x = (e.th_a[i] - th_big * fp) / s;
            p.f_raw[0][i] = f_s * self.ds_draw[i];
            p.f_raw[1][i] = f_beta;
            p.f_raw[2][i] = one - fp;
            p.f_raw[3][i] = f_mu * self.dmu_draw[i];
            p.f_raw[4][i] = f_nu * self.dnu_draw[i];
            p.logd_raw[0][i] = -a * logd_x * self.ds_draw[i];
            p.logd_raw[1][i] = -th_big * emu_over_r;
            p.logd_raw[2][i] = -logd_x;
            p.logd_raw[3][i] = (one - th_big * th_big) * self.dmu_draw[i];
            p.logd_raw[4][i] = (one - th_big * f_nu / s) * self.dnu_draw[i];
            p.f_x[i] = fp;
            p.logd_x[i] = logd_x;
        }
        for (i, &xi) in x.iter().enumerate() {
            if e.far[i] {
                let (mut f_raw, mut logd_raw) = ([T::zero(); SINH_RAW], [T::zero(); SINH_RAW]);
                let scalar = self.lane(i).partials(xi, &mut f_raw, &mut logd_raw);
                for j in 0..SINH_RAW {
                    p.f_raw[j][i] = f_raw[j];
                    p.logd_raw[j][i] = logd_raw[j];
                }
                p.f_x[i] = scalar.f_x;
                p.logd_x[i] = scalar.logd_x;
            }
        }
    }
}

/// One affine layer's constants, one column per lane.
#[derive(Clone, Copy, Debug)]
struct AffineLanes<T> {
    /// the log-scale, which is the layer's log-derivative
    s: Lanes<T>,
    t: Lanes<T>,
    scale: Lanes<T>,
    ds_draw: Lanes<T>,
}

impl<T: Real> AffineLanes<T> {
    #[inline(always)]
    fn new(scalar: Lanes<Affine<T>>) -> Self {
        let parts = scalar.map(|layer| layer.parts());
        let column = |j: usize| from_fn(|i| parts[i][j]);
        Self {
            s: column(0),
            t: column(1),
            scale: column(2),
            ds_draw: column(3),
        }
    }

    #[inline(always)]
    fn x_from_z_value(&self, x: &Lanes<T>) -> Lanes<T> {
        from_fn(|i| self.scale[i] * x[i] + self.t[i])
    }

    #[inline(always)]
    fn z_from_x_value(&self, y: &Lanes<T>) -> Lanes<T> {
        from_fn(|i| (y[i] - self.t[i]) / self.scale[i])
    }

    /// [`Affine::partials`] per lane, at `x`.
    #[inline(always)]
    fn partials_at(&self, x: &Lanes<T>, p: &mut PartialsLanes<T>) {
        for (i, &xi) in x.iter().enumerate() {
            p.f_raw[0][i] = self.scale[i] * xi * self.ds_draw[i];
            p.f_raw[1][i] = T::one();
            p.logd_raw[0][i] = self.ds_draw[i];
            p.logd_raw[1][i] = T::zero();
            p.f_x[i] = self.scale[i];
            p.logd_x[i] = T::zero();
        }
    }
}

/// A layer's slope per lane, as [`Slope`]: a plain ratio, or (the affine
/// family's constant) its logarithm.
enum SlopeLanes<T> {
    Ratio(Lanes<T>),
    Log(Lanes<T>),
}

/// One packed layer, of one of the packed families.
#[derive(Clone, Copy, Debug)]
enum LayerLanes<T> {
    Cubic(CubicLanes<T>),
    Rational(RationalLanes<T>),
    Sinh(SinhLanes<T>),
    Affine(AffineLanes<T>),
}

impl<T: Real> LayerLanes<T> {
    #[inline(always)]
    fn family(&self) -> Family {
        match self {
            Self::Cubic(_) => Family::Cubic,
            Self::Rational(_) => Family::CubicRational,
            Self::Sinh(_) => Family::Sinh,
            Self::Affine(_) => Family::Affine,
        }
    }

    #[inline(always)]
    fn n_raw(&self) -> usize {
        match self {
            Self::Cubic(_) => CUBIC_RAW,
            Self::Rational(_) => RATIONAL_RAW,
            Self::Sinh(_) => SINH_RAW,
            Self::Affine(_) => AFFINE_RAW,
        }
    }

    #[inline(always)]
    fn x_from_z_value(&self, x: &Lanes<T>) -> Lanes<T> {
        match self {
            Self::Cubic(layer) => layer.x_from_z_value(x),
            Self::Rational(layer) => layer.x_from_z_ratio(x).0,
            Self::Sinh(layer) => layer.x_from_z(x).0,
            Self::Affine(layer) => layer.x_from_z_value(x),
        }
    }

    /// `(f(x), slope)` per lane.
    #[inline(always)]
    fn x_from_z_slope(&self, x: &Lanes<T>) -> (Lanes<T>, SlopeLanes<T>) {
        let (y, ratio) = match self {
            Self::Cubic(layer) => layer.x_from_z_ratio(x),
            Self::Rational(layer) => layer.x_from_z_ratio(x),
            Self::Sinh(layer) => {
                let (y, logd) = layer.x_from_z(x);
                return (y, SlopeLanes::Log(logd));
            }
            Self::Affine(layer) => return (layer.x_from_z_value(x), SlopeLanes::Log(layer.s)),
        };
        (y, SlopeLanes::Ratio(ratio))
    }

    /// `(f^-1(y), slope there)` per lane.
    #[inline(always)]
    fn z_from_x_slope(&self, y: &Lanes<T>) -> (Lanes<T>, SlopeLanes<T>) {
        let (x, ratio) = match self {
            Self::Cubic(layer) => layer.z_from_x_ratio(y),
            Self::Rational(layer) => layer.z_from_x_ratio(y),
            Self::Sinh(layer) => {
                let (x, logd) = layer.z_from_x(y);
                return (x, SlopeLanes::Log(logd));
            }
            Self::Affine(layer) => return (layer.z_from_x_value(y), SlopeLanes::Log(layer.s)),
        };
        (x, SlopeLanes::Ratio(ratio))
    }

    /// The derivatives at `x`, given `y = f(x)`.
    #[inline(always)]
    fn partials_at(&self, x: &Lanes<T>, y: &Lanes<T>, p: &mut PartialsLanes<T>) {
        match self {
            Self::Cubic(layer) => layer.partials_at(x, y, p),
            Self::Rational(layer) => layer.partials_at(x, p),
            Self::Sinh(layer) => layer.partials_at(x, p),
            Self::Affine(layer) => layer.partials_at(x, p),
        }
    }
}

/// [`LogSlopeSum`] per lane.
struct SlopeSums<T>([LogSlopeSum<T>; LANES]);

impl<T: Real> SlopeSums<T> {
    #[inline(always)]
    fn new() -> Self {
        Self([LogSlopeSum::default(); LANES])
    }

    #[inline(always)]
    fn add(&mut self, slopes: &SlopeLanes<T>) {
        match slopes {
            SlopeLanes::Ratio(ratios) => {
                // LogSlopeSum::add lane by lane, its range test as one vector
                // test: the logarithm is rare
                let mut inside = true;
                for (sum, &r) in self.0.iter_mut().zip(ratios) {
                    sum.multiply(r);
                    inside &= sum.in_range();
                }
                if !inside {
                    for sum in &mut self.0 {
                        sum.renormalize();
                    }
                }
            }
            SlopeLanes::Log(logs) => {
                for (sum, &l) in self.0.iter_mut().zip(logs) {
                    sum.add(Slope::Log(l));
                }
            }
        }
    }

    #[inline(always)]
    fn write(&self, ld: &mut [T]) {
        for (l, sum) in ld.iter_mut().zip(&self.0) {
            *l = sum.value();
        }
    }
}

/// A stack of layers of the packed families, lane by lane (see the
/// module's notes), for up to [`LANES`] chains each with its own layers.
/// Reused between blocks.
#[derive(Debug, Default)]
pub struct PackedStack<T> {
    layers: Vec<LayerLanes<T>>,
    /// where each layer's raw values start within a chain's
    offsets: Vec<usize>,
    /// the raw values of a chain
    n_raw: usize,
    /// the chains packed (the other lanes repeat the last)
    lanes: usize,
}

impl<T: Real> PackedStack<T> {
    pub fn new() -> Self {
        Self {
            layers: Vec::new(),
            offsets: Vec::new(),
            n_raw: 0,
            lanes: 0,
        }
    }

    fn clear(&mut self) {
        self.layers.clear();
        self.offsets.clear();
        self.n_raw = 0;
        self.lanes = 0;
    }

    fn push(&mut self, layer: LayerLanes<T>) {
        self.offsets.push(self.n_raw);
        self.n_raw += layer.n_raw();
        self.layers.push(layer);
    }

    /// Packs each chain's layers (`built[lane]`, all of one length); `false`
    /// (and nothing packed) when there are more than [`LANES`] chains or a
    /// layer is of no packed family: the caller then runs the `_lanes`
    /// passes.
    pub fn pack<B: AsRef<[Scalar<T>]>>(&mut self, built: &[B]) -> bool {
        self.clear();
        let Some(first) = built.first() else {
            return false;
        };
        if built.len() > LANES {
            return false;
        }
        let chain = |i: usize| built[i.min(built.len() - 1)].as_ref();
        for k in 0..first.as_ref().len() {
            let at = |i: usize| chain(i).get(k);
            let layer = match at(0) {
                Some(Scalar::Cubic(_)) => column(|i| match at(i) {
                    Some(Scalar::Cubic(c)) => Some(*c),
                    _ => None,
                })
                .map(|c| LayerLanes::Cubic(CubicLanes::new(c))),
                Some(Scalar::Affine(_)) => column(|i| match at(i) {
                    Some(Scalar::Affine(a)) => Some(*a),
                    _ => None,
                })
                .map(|a| LayerLanes::Affine(AffineLanes::new(a))),
                Some(Scalar::CubicRational(_)) => column(|i| match at(i) {
                    Some(Scalar::CubicRational(c)) => Some(*c),
                    _ => None,
                })
                .map(|c| LayerLanes::Rational(RationalLanes::new(c))),
                Some(Scalar::Sinh(_)) => column(|i| match at(i) {
                    Some(Scalar::Sinh(b)) => Some(*b),
                    _ => None,
                })
                .map(|b| LayerLanes::Sinh(SinhLanes::new(b))),
                _ => None,
            };
            match layer {
                Some(layer) => self.push(layer),
                None => {
                    self.clear();
                    return false;
                }
            }
        }
        self.lanes = built.len();
        true
    }

    /// Builds the layers of `stack` for each of `lanes` chains from their raw
    /// parameters, lane-inner (raw value `r` of chain `i` at
    /// `raws[r * LANES + i]`, `stack.n_raw() x LANES` values; the padding
    /// lanes take the last chain's, whatever `raws` holds there) straight into
    /// packed form, the cubic's
    /// raw-to-constrained transforms as vector instructions too. `false`
    /// (nothing packed) when a layer is of no packed family.
    pub fn build(&mut self, stack: &Stack, raws: &[T], lanes: usize) -> bool {
        crate::real::on_avx2(
            #[inline(always)]
            || self.build_here(stack, raws, lanes),
        )
    }

    /// [`Self::build`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn build_here(&mut self, stack: &Stack, raws: &[T], lanes: usize) -> bool {
        let packable = |f: &Family| {
            matches!(
                f,
                Family::Cubic | Family::CubicRational | Family::Sinh | Family::Affine
            )
        };
        if lanes == 0 || lanes > LANES || !stack.layers().iter().all(packable) {
            self.clear();
            return false;
        }
        // a block's layers overwrite the last block's in place where they are
        // of the same families (each layer is hundreds of bytes)
        let same_shape = self.layers.len() == stack.len()
            && self
                .layers
                .iter()
                .zip(stack.layers())
                .all(|(layer, family)| layer.family() == *family);
        if !same_shape {
            self.clear();
        }
        // raw value j of every lane, the padding lanes repeating the last
        let row = |j: usize| -> Lanes<T> {
            let mut row = [T::zero(); LANES];
            row.copy_from_slice(&raws[j * LANES..(j + 1) * LANES]);
            for i in lanes..LANES {
                row[i] = row[lanes - 1];
            }
            row
        };
        for (k, family) in stack.layers().iter().enumerate() {
            let start = stack.layer_range(k).start;
            let layer = match family {
                Family::Cubic => {
                    let raw: [Lanes<T>; CUBIC_RAW] = from_fn(|j| row(start + j));
                    if let Some(LayerLanes::Cubic(layer)) = self.layers.get_mut(k) {
                        *layer = CubicLanes::from_raw(&raw);
                        continue;
                    }
                    LayerLanes::Cubic(CubicLanes::from_raw(&raw))
                }
                Family::Affine => {
                    let raw: [Lanes<T>; AFFINE_RAW] = from_fn(|j| row(start + j));
                    LayerLanes::Affine(AffineLanes::new(std::array::from_fn(|i| {
                        Affine::from_raw(&raw.map(|r| r[i]))
                    })))
                }
                Family::Sinh => {
                    let raw: [Lanes<T>; SINH_RAW] = from_fn(|j| row(start + j));
                    LayerLanes::Sinh(SinhLanes::new(std::array::from_fn(|i| {
                        Sinh::from_raw(&raw.map(|r| r[i]))
                    })))
                }
                _ => {
                    let raw: [Lanes<T>; RATIONAL_RAW] = from_fn(|j| row(start + j));
                    LayerLanes::Rational(RationalLanes::new(std::array::from_fn(|i| {
                        CubicRational::from_raw(&raw.map(|r| r[i]))
                    })))
                }
            };
            if same_shape {
                self.layers[k] = layer;
            } else {
                self.push(layer);
            }
        }
        self.lanes = lanes;
        true
    }

    /// How many chains are packed (0 when [`Self::pack`] refused).
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// The packed chains' values, the rest padded with the last.
    #[inline(always)]
    fn load(&self, v: &[T]) -> Lanes<T> {
        from_fn(|i| v[i.min(self.lanes - 1)])
    }

    /// The packed chains' adjoints, the rest zero: a padding lane then adds
    /// nothing to the raw adjoints (while the last chain's partials are finite).
    #[inline(always)]
    fn load_adjoint(&self, v: &[T]) -> Lanes<T> {
        from_fn(|i| if i < self.lanes { v[i] } else { T::zero() })
    }

    /// Row `k` of lane-inner `traces`.
    #[inline(always)]
    fn row(traces: &[T], k: usize) -> Lanes<T> {
        let mut row = [T::zero(); LANES];
        row.copy_from_slice(&traces[k * LANES..(k + 1) * LANES]);
        row
    }

    /// As [`Stack::x_from_z_value_lanes`](super::Stack::x_from_z_value_lanes),
    /// with the traces lane-inner: layer `k`'s input of lane `i` at
    /// `traces[k * LANES + i]` (`K x LANES` values, the padding lanes too).
    pub fn x_from_z_value(&self, v: &mut [T], traces: &mut [T]) {
        crate::real::on_avx2(
            #[inline(always)]
            || self.x_from_z_value_here(v, traces),
        )
    }

    /// [`Self::x_from_z_value`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn x_from_z_value_here(&self, v: &mut [T], traces: &mut [T]) {
        let mut x = self.load(v);
        for (k, layer) in self.layers.iter().enumerate() {
            traces[k * LANES..(k + 1) * LANES].copy_from_slice(&x);
            x = layer.x_from_z_value(&x);
        }
        v[..self.lanes].copy_from_slice(&x[..self.lanes]);
    }

    /// As [`Stack::x_from_z_lanes`](super::Stack::x_from_z_lanes), the traces
    /// lane-inner as in [`Self::x_from_z_value`].
    pub fn x_from_z(&self, v: &mut [T], ld: &mut [T], traces: &mut [T]) {
        crate::real::on_avx2(
            #[inline(always)]
            || self.x_from_z_here(v, ld, traces),
        )
    }

    /// [`Self::x_from_z`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn x_from_z_here(&self, v: &mut [T], ld: &mut [T], traces: &mut [T]) {
        let mut x = self.load(v);
        let mut sums = SlopeSums::new();
        for (k, layer) in self.layers.iter().enumerate() {
            traces[k * LANES..(k + 1) * LANES].copy_from_slice(&x);
            let (y, slope) = layer.x_from_z_slope(&x);
            x = y;
            sums.add(&slope);
        }
        v[..self.lanes].copy_from_slice(&x[..self.lanes]);
        sums.write(&mut ld[..self.lanes]);
    }

    /// As [`Stack::z_from_x_lanes`](super::Stack::z_from_x_lanes), the traces
    /// lane-inner as in [`Self::x_from_z_value`].
    pub fn z_from_x(&self, v: &mut [T], ld: &mut [T], traces: &mut [T]) {
        crate::real::on_avx2(
            #[inline(always)]
            || self.z_from_x_here(v, ld, traces),
        )
    }

    /// [`Self::z_from_x`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn z_from_x_here(&self, v: &mut [T], ld: &mut [T], traces: &mut [T]) {
        let mut x = self.load(v);
        let mut sums = SlopeSums::new();
        for (k, layer) in self.layers.iter().enumerate().rev() {
            let (z, slope) = layer.z_from_x_slope(&x);
            x = z;
            traces[k * LANES..(k + 1) * LANES].copy_from_slice(&x);
            sums.add(&slope);
        }
        v[..self.lanes].copy_from_slice(&x[..self.lanes]);
        sums.write(&mut ld[..self.lanes]);
    }

    /// Layer `k`'s input and output per lane from the traces (`last`: the
    /// stack's output in the sampling direction).
    #[inline(always)]
    fn layer_points(&self, traces: &[T], last: &[T], k: usize) -> (Lanes<T>, Lanes<T>) {
        let output = if k + 1 < self.layers.len() {
            Self::row(traces, k + 1)
        } else {
            self.load(last)
        };
        (Self::row(traces, k), output)
    }

    /// As [`Stack::x_from_z_backward_lanes`](super::Stack::x_from_z_backward_lanes),
    /// lane-inner: the traces as [`Self::x_from_z`] wrote them, and the raw
    /// adjoints added at `raw_bar[r * LANES + i]` for raw value `r` of lane
    /// `i` (`n_raw x LANES` values; the padding lanes add zeros).
    pub fn x_from_z_backward(
        &self,
        traces: &[T],
        out: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        crate::real::on_avx2(
            #[inline(always)]
            || self.x_from_z_backward_here(traces, out, bar, ld_bar, raw_bar),
        )
    }

    /// [`Self::x_from_z_backward`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn x_from_z_backward_here(
        &self,
        traces: &[T],
        out: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        let ld_bar = self.load_adjoint(ld_bar);
        let mut b = self.load_adjoint(bar);
        // every layer writes the rows it has (and reads no others)
        let mut p = PartialsLanes::zero();
        for (k, layer) in self.layers.iter().enumerate().rev() {
            let (z, x) = self.layer_points(traces, out, k);
            layer.partials_at(&z, &x, &mut p);
            let rows = &mut raw_bar[self.offsets[k] * LANES..];
            for (j, row) in rows.chunks_exact_mut(LANES).take(layer.n_raw()).enumerate() {
                for (i, r) in row.iter_mut().enumerate() {
                    *r += b[i] * p.f_raw[j][i] + ld_bar[i] * p.logd_raw[j][i];
                }
            }
            b = from_fn(|i| b[i] * p.f_x[i] + ld_bar[i] * p.logd_x[i]);
        }
        bar[..self.lanes].copy_from_slice(&b[..self.lanes]);
    }

    /// As [`Stack::z_from_x_backward_lanes`](super::Stack::z_from_x_backward_lanes),
    /// lane-inner as [`Self::x_from_z_backward`].
    pub fn z_from_x_backward(
        &self,
        traces: &[T],
        x: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        crate::real::on_avx2(
            #[inline(always)]
            || self.z_from_x_backward_here(traces, x, bar, ld_bar, raw_bar),
        )
    }

    /// [`Self::z_from_x_backward`]'s body, inlined into each vector width's copy.
    #[inline(always)]
    fn z_from_x_backward_here(
        &self,
        traces: &[T],
        x: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        let ld_bar = self.load_adjoint(ld_bar);
        let mut b = self.load_adjoint(bar);
        // every layer writes the rows it has (and reads no others)
        let mut p = PartialsLanes::zero();
        for (k, layer) in self.layers.iter().enumerate() {
            let (z, y) = self.layer_points(traces, x, k);
            layer.partials_at(&z, &y, &mut p);
            // dz/dx = 1/f', dz/dθ = -f_θ/f'; ld = -log f'(z(x, θ), θ)
            let g: Lanes<T> = from_fn(|i| b[i] - ld_bar[i] * p.logd_x[i]);
            let inv_fx: Lanes<T> = from_fn(|i| T::one() / p.f_x[i]);
            let rows = &mut raw_bar[self.offsets[k] * LANES..];
            for (j, row) in rows.chunks_exact_mut(LANES).take(layer.n_raw()).enumerate() {
                for (i, r) in row.iter_mut().enumerate() {
                    *r -= g[i] * p.f_raw[j][i] * inv_fx[i] + ld_bar[i] * p.logd_raw[j][i];
                }
            }
            b = from_fn(|i| g[i] * inv_fx[i]);
        }
        bar[..self.lanes].copy_from_slice(&b[..self.lanes]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pass, through [`crate::real::on_avx2`] and on the build's own
    /// vectors: the same operations in the same order on every vector width
    /// (no fused multiply-adds), so the same bits. (Without AVX2 both sides
    /// run the same code.)
    #[test]
    fn the_passes_on_avx2_are_the_same_bits_as_on_the_builds_own_vectors() {
        let stack = Stack::mixed(vec![
            Family::Cubic,
            Family::Affine,
            Family::Cubic,
            Family::CubicRational,
            Family::Sinh,
            Family::Cubic,
        ]);
        let (k, p) = (stack.len(), stack.n_raw());
        // spread values (a small linear congruential generator: this layer
        // has no random numbers of its own)
        let mut state = 7u64;
        let mut spread = |n: usize, scale: f64| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let uniform = (state >> 11) as f64 / (1u64 << 53) as f64;
                    (scale * 3.0 * (2.0 * uniform - 1.0)) as f32
                })
                .collect()
        };
        // raw values from -9 to 9, some beyond the scales' bounds
        let raws = spread(p * LANES, 3.0);
        let points = spread(LANES, 2.0);
        let (bars, ld_bars) = (spread(LANES, 1.0), spread(LANES, 1.0));
        for lanes in [LANES, 5] {
            let run = |on_avx2: bool| -> String {
                let mut packed = PackedStack::new();
                let mut out = String::new();
                let built = if on_avx2 {
                    packed.build(&stack, &raws, lanes)
                } else {
                    packed.build_here(&stack, &raws, lanes)
                };
                assert!(built);
                out += &format!("{:?}", packed.layers);
                let (mut v, mut ld) = (points[..lanes].to_vec(), vec![0.0; lanes]);
                let mut traces = vec![0.0; k * LANES];
                let (mut bar, mut raw_bar) = (bars[..lanes].to_vec(), vec![0.0; p * LANES]);
                let ld_bar = &ld_bars[..lanes];
                if on_avx2 {
                    packed.x_from_z_value(&mut v, &mut traces);
                    out += &format!("{v:?}{traces:?}");
                    v.copy_from_slice(&points[..lanes]);
                    packed.x_from_z(&mut v, &mut ld, &mut traces);
                    packed.x_from_z_backward(&traces, &v, &mut bar, ld_bar, &mut raw_bar);
                    out += &format!("{v:?}{ld:?}{bar:?}{raw_bar:?}");
                    let x = v.clone();
                    packed.z_from_x(&mut v, &mut ld, &mut traces);
                    packed.z_from_x_backward(&traces, &x, &mut bar, ld_bar, &mut raw_bar);
                } else {
                    packed.x_from_z_value_here(&mut v, &mut traces);
                    out += &format!("{v:?}{traces:?}");
                    v.copy_from_slice(&points[..lanes]);
                    packed.x_from_z_here(&mut v, &mut ld, &mut traces);
                    packed.x_from_z_backward_here(&traces, &v, &mut bar, ld_bar, &mut raw_bar);
                    out += &format!("{v:?}{ld:?}{bar:?}{raw_bar:?}");
                    let x = v.clone();
                    packed.z_from_x_here(&mut v, &mut ld, &mut traces);
                    packed.z_from_x_backward_here(&traces, &x, &mut bar, ld_bar, &mut raw_bar);
                }
                out + &format!("{v:?}{ld:?}{bar:?}{raw_bar:?}")
            };
            let (dispatched, own) = (run(true), run(false));
            assert!(!dispatched.contains("NaN"), "{dispatched}");
            assert_eq!(dispatched, own, "{lanes} lanes");
        }
    }
}
