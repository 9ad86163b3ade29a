//! Sinh conjugation: `f(x) = c + s asinh(e^mu (e^nu sinh(u/s) + beta))` (docs/mathematics.md, section 2.2).

use super::{ParamSpec, ScalarPartials};
use crate::real::{Real, log_cosh, sech, sigmoid, softplus, softplus_inv};

const S_MIN: f64 = 0.1;
const LN_2: f64 = std::f64::consts::LN_2;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec::new("s", "s > 0.1", S_MIN, f64::INFINITY),
    ParamSpec::new("beta", "any real", f64::NEG_INFINITY, f64::INFINITY),
    ParamSpec::new("c", "any real", f64::NEG_INFINITY, f64::INFINITY),
    ParamSpec::new("mu", "-40 < mu < 40", -40.0, 40.0),
    ParamSpec::new("nu", "-40 < nu < 40", -40.0, 40.0),
];

#[derive(Clone, Copy, Debug)]
pub struct Sinh<T> {
    pub s: T,
    pub beta: T,
    pub c: T,
    pub mu: T,
    pub nu: T,
    ds_draw: T,
    dmu_draw: T,
    dnu_draw: T,
}

/// `asinh(z)` for `z = sign e^log_z`, without forming a huge `z`.
#[inline]
fn asinh_from_log<T: Real>(sign: T, log_z: T) -> T {
    if log_z > T::c(10.0) {
        // asinh(z) = sgn(z) (log|z| + ln 2 + O(z^-2)), exact to float64 beyond e^10
        sign * (log_z + T::c(LN_2) + (T::c(-2.0) * log_z).exp() / T::c(4.0))
    } else {
        (sign * log_z.exp()).asinh()
    }
}

/// Values of one evaluation that the derivatives reuse.
struct Eval<T> {
    a: T,
    /// asinh(z), z = e^mu (e^nu sinh a + beta)
    big_a: T,
    /// log f'
    logd: T,
}

impl<T: Real> Sinh<T> {
    pub fn from_raw(raw: &[T]) -> Self {
        Self {
            s: softplus(raw[0]) + T::c(S_MIN),
            beta: raw[1],
            c: raw[2],
            mu: raw[3].asinh(),
            nu: raw[4].asinh(),
            ds_draw: sigmoid(raw[0]),
            dmu_draw: T::one() / (T::one() + raw[3] * raw[3]).sqrt(),
            dnu_draw: T::one() / (T::one() + raw[4] * raw[4]).sqrt(),
        }
    }

    /// The layer's values: s, beta, c, mu, nu, then the derivatives of s, mu
    /// and nu with respect to their raw parameters ([`Self::from_parts`] inverts it).
    pub fn parts(&self) -> [T; 8] {
        [
            self.s,
            self.beta,
            self.c,
            self.mu,
            self.nu,
            self.ds_draw,
            self.dmu_draw,
            self.dnu_draw,
        ]
    }

    /// The layer of [`Self::parts`].
    pub fn from_parts(parts: [T; 8]) -> Self {
        let [s, beta, c, mu, nu, ds_draw, dmu_draw, dnu_draw] = parts;
        Self {
            s,
            beta,
            c,
            mu,
            nu,
            ds_draw,
            dmu_draw,
            dnu_draw,
        }
    }

    pub fn raw_from_constrained(v: &[f64]) -> Vec<f64> {
        vec![
            softplus_inv(v[0] - S_MIN),
            v[1],
            v[2],
            v[3].sinh(),
            v[4].sinh(),
        ]
    }

    pub fn constrained(&self) -> Vec<f64> {
        [self.s, self.beta, self.c, self.mu, self.nu]
            .iter()
            .map(|v| v.to_f64())
            .collect()
    }

    /// The map with the given (beta, mu, nu); the inverse swaps them.
    #[inline]
    fn eval(&self, x: T, beta: T, mu: T, nu: T) -> Eval<T> {
        let a = (x - self.c) / self.s;
        // Below |a| = 20 sinh(a) and e^nu sinh(a) are finite in float32 (|nu| < 40),
        // and asinh takes any finite z; only e^mu (...) can overflow.
        if a.abs() < T::c(20.0) {
            let inner = nu.exp() * a.sinh() + beta;
            let z = mu.exp() * inner;
            let big_a = if z.is_finite() {
                z.asinh()
            } else {
                asinh_from_log(inner.sign_nonneg(), mu + inner.abs().ln())
            };
            let logd = mu + nu + log_cosh(a) - log_cosh(big_a);
            return Eval { a, big_a, logd };
        }
        // z = sgn(a) e^(mu + nu + |a|) / 2 * q with q = 1 + 2 sgn(a) beta e^(-nu - |a|)
        // (the e^(-2|a|) of sinh is below float64's resolution here).
        let sg = a.sign_nonneg();
        let q = T::one() + T::c(2.0) * sg * beta * (-nu - a.abs()).exp();
        let log_z = mu + nu + a.abs() - T::c(LN_2) + q.abs().ln();
        let big_a = asinh_from_log(sg * q.sign_nonneg(), log_z);
        let logd = if log_z > T::c(10.0) {
            // log cosh(a) - log cosh(A) with |A| = mu + nu + |a| + ln|q| + e^(-2 log_z)/4:
            // the large terms cancel exactly, leaving
            let tail = |v: T| (T::c(-2.0) * v.abs()).exp().ln_1p();
            -q.abs().ln() - (T::c(-2.0) * log_z).exp() / T::c(4.0) + tail(a) - tail(big_a)
        } else {
            mu + nu + log_cosh(a) - log_cosh(big_a)
        };
        Eval { a, big_a, logd }
    }

    /// `f(x0 + d) - y0`, `y0 = f(x0)`, for the forward map: with `z1, z2` the
    /// inner values, `sinh(a2) - sinh(a1) = 2 cosh((a1 + a2)/2) sinh((a2 - a1)/2)` and
    /// `asinh z2 - asinh z1 = asinh(z2 R1 - z1 R2)`, `R = sqrt(1 + z^2)`, the latter
    /// rewritten as `(z2 - z1)(z1 + z2)/(z2 R1 + z1 R2)` when both have one sign.
    pub fn diff(&self, x0: T, y0: T, d: T) -> T {
        let a1 = (x0 - self.c) / self.s;
        // the step in a from d itself: a2 - a1 would cancel
        let da = d / self.s;
        let a2 = a1 + da;
        let em = self.mu.exp();
        let z1 = em * (self.nu.exp() * a1.sinh() + self.beta);
        let z2 = em * (self.nu.exp() * a2.sinh() + self.beta);
        let big = T::c(1e15);
        if !(a1.abs() < T::c(20.0) && a2.abs() < T::c(20.0) && z1.abs() < big && z2.abs() < big) {
            // far out: values are large and their difference does not cancel badly
            return self.x_from_z(x0 + d).0 - y0;
        }
        let dz =
            em * self.nu.exp() * T::c(2.0) * (a1 + T::c(0.5) * da).cosh() * (T::c(0.5) * da).sinh();
        let (r1, r2) = ((T::one() + z1 * z1).sqrt(), (T::one() + z2 * z2).sqrt());
        let p = if z1 * z2 > T::zero() {
            dz * (z1 + z2) / (z2 * r1 + z1 * r2)
        } else {
            z2 * r1 - z1 * r2
        };
        self.s * p.asinh()
    }

    #[inline]
    pub fn x_from_z(&self, x: T) -> (T, T) {
        let e = self.eval(x, self.beta, self.mu, self.nu);
        (self.c + self.s * e.big_a, e.logd)
    }

    #[inline]
    pub fn z_from_x(&self, y: T) -> (T, T) {
        let e = self.eval(y, -self.beta, -self.nu, -self.mu);
        (self.c + self.s * e.big_a, -e.logd)
    }

    #[inline]
    pub fn partials(&self, x: T, f_raw: &mut [T], logd_raw: &mut [T]) -> ScalarPartials<T> {
        let Eval { a, big_a, logd } = self.eval(x, self.beta, self.mu, self.nu);
        let s = self.s;
        let fp = logd.exp();
        let th_a = a.tanh();
        let th_big = big_a.tanh();
        // e^mu / R with R = sqrt(1 + z^2) = cosh(A)
        let emu_over_r = (self.mu.exp()) * sech(big_a);
        let f_beta = s * emu_over_r;
        let f_mu = s * th_big;
        let f_nu = f_mu - self.beta * f_beta;
        let f_s = big_a - a * fp;
        let logd_a = th_a - th_big * fp;
        let logd_x = logd_a / s;
        f_raw[0] = f_s * self.ds_draw;
        f_raw[1] = f_beta;
        f_raw[2] = T::one() - fp;
        f_raw[3] = f_mu * self.dmu_draw;
        f_raw[4] = f_nu * self.dnu_draw;
        logd_raw[0] = -a * logd_x * self.ds_draw;
        logd_raw[1] = -th_big * emu_over_r;
        logd_raw[2] = -logd_x;
        logd_raw[3] = (T::one() - th_big * th_big) * self.dmu_draw;
        logd_raw[4] = (T::one() - th_big * f_nu / s) * self.dnu_draw;
        ScalarPartials {
            f: self.c + s * big_a,
            f_x: fp,
            logd_x,
        }
    }
}
