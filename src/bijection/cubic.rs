//! Cubic polynomial conjugation: `f(x) = c + g^-1(g(u) + beta)`, `g(v) = a v + b v^3`
//! (docs/mathematics.md, section 2.3).

use super::{ParamSpec, ScalarPartials};
use crate::real::Real;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec::new(
        "a",
        "e^-2 < a < e^2",
        0.135_335_283_236_612_7,
        7.389_056_098_930_65,
    ),
    ParamSpec::new(
        "b",
        "e^-2 < b < e^2",
        0.135_335_283_236_612_7,
        7.389_056_098_930_65,
    ),
    ParamSpec::new("beta", "any real", f64::NEG_INFINITY, f64::INFINITY),
    ParamSpec::new("c", "any real", f64::NEG_INFINITY, f64::INFINITY),
];

#[derive(Clone, Copy, Debug)]
pub struct Cubic<T> {
    pub a: T,
    pub b: T,
    pub beta: T,
    pub c: T,
    pub(super) da_draw: T,
    pub(super) db_draw: T,
    /// 2 sqrt(a / (3b)) and (3 sqrt 3 / 2) sqrt(b) / a^(3/2): the inverse's constants.
    pub(super) inv_scale: T,
    pub(super) inv_arg: T,
}

/// `sinh(asinh(t) / 3)` for `0 <= t < 1e15`, the stable form of
/// [`Cubic::g_inv`] with its three quotients as one: with `s = sqrt(t^2 + 1)`,
/// `P = t (s + 1 + t) / (s + 1)` and `1 / q = (t + s)^(-1/3)` (Newton steps, no
/// division), `h = P (q + 1) / (q (q^2 + q + 1) 2)`. One square root and one
/// division where the plain form takes a cube root and four quotients: the
/// training chains run this once a layer and sample. Shared by the scalar rule
/// and the lane kernels (`lanes.rs`), operation for operation.
#[inline(always)]
pub(super) fn sinh_third<T: Real>(t: T) -> T {
    let one = T::one();
    let s = (t * t + one).sqrt();
    let (q3, s1) = (t + s, s + one);
    let r = q3.rcbrt_normal();
    let q = q3 * r * r;
    // t (s + 1 + t) stays below 4e30 and (q + 1) r below 2 for t < 1e15
    (t * (s1 + t)) * ((q + one) * r) / (T::c(2.0) * s1 * (q * q + q + one))
}

/// `(sqrt(v), v, dv/draw)` for `v = exp(2 tanh(raw / 2))`, with `tanh(raw/2)`
/// from a single exponential.
#[inline]
fn bounded_scale<T: Real>(raw: T) -> (T, T, T) {
    let e = (-raw.abs()).exp();
    let th = raw.sign_nonneg() * (T::one() - e) / (T::one() + e);
    let root = th.exp();
    let v = root * root;
    (root, v, v * (T::one() - th * th))
}

fn bounded_scale_inv(v: f64) -> f64 {
    2.0 * (v.ln() / 2.0).atanh()
}

impl<T: Real> Cubic<T> {
    pub fn from_raw(raw: &[T]) -> Self {
        let (sa, a, da_draw) = bounded_scale(raw[0]);
        let (sb, b, db_draw) = bounded_scale(raw[1]);
        let sqrt3 = T::c(3f64.sqrt());
        Self {
            a,
            b,
            beta: raw[2],
            c: raw[3],
            da_draw,
            db_draw,
            inv_scale: T::c(2.0) * sa / (sqrt3 * sb),
            inv_arg: T::c(1.5) * sqrt3 * sb / (a * sa),
        }
    }

    pub fn raw_from_constrained(v: &[f64]) -> Vec<f64> {
        vec![bounded_scale_inv(v[0]), bounded_scale_inv(v[1]), v[2], v[3]]
    }

    pub fn constrained(&self) -> Vec<f64> {
        [self.a, self.b, self.beta, self.c]
            .iter()
            .map(|v| v.to_f64())
            .collect()
    }

    #[inline]
    fn g(&self, v: T) -> T {
        v * (self.a + self.b * v * v)
    }

    #[inline]
    fn g_prime(&self, v: T) -> T {
        self.a + T::c(3.0) * self.b * v * v
    }

    /// The hyperbolic closed form `g^-1(w) = s sinh(asinh(k w) / 3)`, evaluated
    /// without transcendentals: `h = sinh(asinh(t)/3)` solves `4h^3 + 3h = t`,
    /// and with `q^3 = t + sqrt(t^2 + 1) = 1 + P`, `h = (q - 1)(q + 1) / (2q)`
    /// where `q - 1 = P / (q^2 + q + 1)` (no cancellation for small t, no
    /// overflow for large t). See [`sinh_third`].
    #[inline]
    pub(super) fn g_inv(&self, w: T) -> T {
        let t = (self.inv_arg * w).abs();
        let h = if t < T::c(1e15) {
            sinh_third(t)
        } else {
            // sinh(asinh(t)/3) = (q - 1/q)/2 with q = cbrt(2t) to float precision
            let q = (T::c(2.0) * t).cbrt();
            T::c(0.5) * (q - T::one() / q)
        };
        self.inv_scale * w.sign_nonneg() * h
    }

    #[inline]
    pub fn x_from_z_value(&self, x: T) -> T {
        self.c + self.g_inv(self.g(x - self.c) + self.beta)
    }

    #[inline]
    pub fn x_from_z(&self, x: T) -> (T, T) {
        let (y, ratio) = self.x_from_z_ratio(x);
        (y, ratio.ln())
    }

    #[inline]
    pub fn z_from_x(&self, y: T) -> (T, T) {
        let (x, ratio) = self.z_from_x_ratio(y);
        (x, ratio.ln())
    }

    /// `f(x0 + d) - y0`, `y0 = f(x0)`: from `g(v2) - g(v1) = g(u2) - g(u1)`,
    /// `v2 - v1 = d (a + b (3u^2 + 3u d + d^2)) / (a + b (v1^2 + v1 v2 + v2^2))`.
    #[inline]
    pub fn diff(&self, x0: T, y0: T, d: T) -> T {
        let (a, b) = (self.a, self.b);
        let u = x0 - self.c;
        let v1 = y0 - self.c;
        let v2 = self.g_inv(self.g(u + d) + self.beta);
        let dw = d * (a + b * (T::c(3.0) * u * u + T::c(3.0) * u * d + d * d));
        dw / (a + b * (v1 * v1 + v1 * v2 + v2 * v2))
    }

    /// `(f(x), f'(x))`, the derivative not logged.
    #[inline]
    pub fn x_from_z_ratio(&self, x: T) -> (T, T) {
        let u = x - self.c;
        let v = self.g_inv(self.g(u) + self.beta);
        (self.c + v, self.g_prime(u) / self.g_prime(v))
    }

    /// `(f^-1(y), f'(f^-1(y)))`, the derivative not logged.
    #[inline]
    pub fn z_from_x_ratio(&self, y: T) -> (T, T) {
        let v = y - self.c;
        let u = self.g_inv(self.g(v) - self.beta);
        (self.c + u, self.g_prime(u) / self.g_prime(v))
    }

    /// Partials at `x`, given `y = f(x)` (so nothing is solved again).
    #[inline]
    pub fn partials_at(
        &self,
        x: T,
        y: T,
        f_raw: &mut [T],
        logd_raw: &mut [T],
    ) -> ScalarPartials<T> {
        let b = self.b;
        let u = x - self.c;
        let v = y - self.c;
        let gu = self.g_prime(u);
        let gv = self.g_prime(v);
        let inv_gv = T::one() / gv;
        let fp = gu * inv_gv;
        // Implicit differentiation of g(v) = g(u) + beta.
        let d = u - v;
        let v_a = d * inv_gv;
        let v_b = d * (u * u + u * v + v * v) * inv_gv;
        let v_beta = inv_gv;
        let six_b = T::c(6.0) * b;
        // one quotient for the three terms over g'(u)
        let inv_gu = T::one() / gu;
        let logd_x = six_b * u * inv_gu - six_b * v * inv_gv * fp;
        let logd_a = inv_gu - (T::one() + six_b * v * v_a) * inv_gv;
        let logd_b = T::c(3.0) * u * u * inv_gu - (T::c(3.0) * v * v + six_b * v * v_b) * inv_gv;
        let logd_beta = -six_b * v * v_beta * inv_gv;
        f_raw[0] = v_a * self.da_draw;
        f_raw[1] = v_b * self.db_draw;
        f_raw[2] = v_beta;
        f_raw[3] = T::one() - fp;
        logd_raw[0] = logd_a * self.da_draw;
        logd_raw[1] = logd_b * self.db_draw;
        logd_raw[2] = logd_beta;
        logd_raw[3] = -logd_x;
        ScalarPartials {
            f: self.c + v,
            f_x: fp,
            logd_x,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sinh(asinh(t) / 3)` in float64 against the one-quotient form, in both
    /// precisions, from t = 0 to where the scalar rule takes its far form.
    #[test]
    fn one_quotient_form_is_sinh_of_a_third_of_asinh() {
        let mut t = 1e-30f64;
        let mut worst32 = 0f64;
        while t < 1e15 {
            for t in [t, t * 1.7] {
                let want = (t.asinh() / 3.0).sinh();
                let got = sinh_third(t);
                assert!((got - want).abs() <= 8.0 * f64::EPSILON * want, "t = {t}");
                let t32 = t as f32;
                let want32 = ((t32 as f64).asinh() / 3.0).sinh();
                worst32 = worst32.max((sinh_third(t32) as f64 - want32).abs() / want32);
            }
            t *= 1.31;
        }
        assert!(worst32 <= 8.0 * f32::EPSILON as f64, "float32: {worst32}");
        assert_eq!(sinh_third(0f32), 0.0);
    }
}
