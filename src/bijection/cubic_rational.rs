//! Cubic rational family: `f(x) = x + alpha u / (1 + beta u^2)`, `u = x - c` (docs/mathematics.md, section 2.1).

use super::{ParamSpec, ScalarPartials};
use crate::real::{Real, sigmoid, softplus, softplus_inv};

/// Bounds of alpha (bijx: (-1, 8) shrunk by 1e-3).
pub const ALPHA_LOW: f64 = -1.0 + 1e-3;
pub const ALPHA_HIGH: f64 = 8.0 - 1e-3;
const BETA_MIN: f64 = 0.1;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec::new("alpha", "-1 < alpha < 8", ALPHA_LOW, ALPHA_HIGH),
    ParamSpec::new("beta", "beta > 0.1", BETA_MIN, f64::INFINITY),
    ParamSpec::new("c", "any real", f64::NEG_INFINITY, f64::INFINITY),
];

/// Raw offset that makes raw 0 give alpha 0 (the identity).
fn alpha_offset() -> f64 {
    let p = -ALPHA_LOW / (ALPHA_HIGH - ALPHA_LOW);
    (p / (1.0 - p)).ln()
}

/// Constrained parameters and the derivatives of the raw -> constrained transform.
#[derive(Clone, Copy, Debug)]
pub struct CubicRational<T> {
    pub alpha: T,
    pub beta: T,
    pub c: T,
    dalpha_draw: T,
    dbeta_draw: T,
}

impl<T: Real> CubicRational<T> {
    pub fn from_raw(raw: &[T]) -> Self {
        let sa = sigmoid(raw[0] + T::c(alpha_offset()));
        let span = T::c(ALPHA_HIGH - ALPHA_LOW);
        let sb = sigmoid(raw[1] + T::one());
        Self {
            alpha: T::c(ALPHA_LOW) + span * sa,
            beta: T::c(BETA_MIN) + softplus(raw[1] + T::one()),
            c: raw[2],
            dalpha_draw: span * sa * (T::one() - sa),
            dbeta_draw: sb,
        }
    }

    /// The map with the given constrained values, bypassing the raw transform
    /// (bijx's "no transforms"; beta may then be below the transform's 0.1).
    /// Raw-parameter derivatives of such a layer are those of alpha and beta.
    pub fn from_constrained(alpha: T, beta: T, c: T) -> Self {
        Self {
            alpha,
            beta,
            c,
            dalpha_draw: T::one(),
            dbeta_draw: T::one(),
        }
    }

    /// Constrained (alpha, beta, c) -> raw; the caller has checked the bounds.
    pub fn raw_from_constrained(values: &[f64]) -> Vec<f64> {
        let p = (values[0] - ALPHA_LOW) / (ALPHA_HIGH - ALPHA_LOW);
        let a_raw = (p / (1.0 - p)).ln() - alpha_offset();
        let b_raw = softplus_inv(values[1] - BETA_MIN) - 1.0;
        vec![a_raw, b_raw, values[2]]
    }

    pub fn constrained(&self) -> Vec<f64> {
        vec![self.alpha.to_f64(), self.beta.to_f64(), self.c.to_f64()]
    }

    /// `(f(x), log f'(x))`.
    #[inline]
    pub fn x_from_z(&self, x: T) -> (T, T) {
        let (y, fp) = self.x_from_z_ratio(x);
        (y, fp.ln())
    }

    /// `(f(x), f'(x))`: the slope as a ratio, which a stack multiplies
    /// instead of adding logarithms (f' lies between 1e-3 and 9).
    #[inline]
    pub fn x_from_z_ratio(&self, x: T) -> (T, T) {
        let u = x - self.c;
        let bu2 = self.beta * u * u;
        let d = T::one() + bu2;
        let y = x + self.alpha * u / d;
        let fp = T::one() + self.alpha * (T::one() - bu2) / (d * d);
        (y, fp)
    }

    /// `(f^-1(y), f'(f^-1(y)))`.
    #[inline]
    pub fn z_from_x_ratio(&self, y: T) -> (T, T) {
        let x = self.solve_centred(y - self.c) + self.c;
        (x, self.x_from_z_ratio(x).1)
    }

    /// The constrained parameters and their derivatives by the raw ones,
    /// `(alpha, beta, c, d alpha / d raw, d beta / d raw)`.
    pub fn parts(&self) -> [T; 5] {
        [
            self.alpha,
            self.beta,
            self.c,
            self.dalpha_draw,
            self.dbeta_draw,
        ]
    }

    /// The layer of [`Self::parts`].
    pub fn from_parts(parts: [T; 5]) -> Self {
        let [alpha, beta, c, dalpha_draw, dbeta_draw] = parts;
        Self {
            alpha,
            beta,
            c,
            dalpha_draw,
            dbeta_draw,
        }
    }

    /// `f(x0 + d) - f(x0)`, exactly rearranged: `d + alpha d (1 - beta u (u + d))
    /// / ((1 + beta (u + d)^2) (1 + beta u^2))`, `u = x0 - c`.
    #[inline]
    pub fn diff(&self, x0: T, d: T) -> T {
        let u = x0 - self.c;
        let w = u + d;
        let num = T::one() - self.beta * u * w;
        let den = (T::one() + self.beta * w * w) * (T::one() + self.beta * u * u);
        d + self.alpha * d * num / den
    }

    /// `(f^-1(y), log f'(f^-1(y)))` by the float32-stable closed form.
    #[inline]
    pub fn z_from_x(&self, y_in: T) -> (T, T) {
        let y = y_in - self.c;
        let x = self.solve_centred(y) + self.c;
        let (_, ld) = self.x_from_z(x);
        (x, ld)
    }

    /// Solves `u + alpha u/(1 + beta u^2) = y` for `u`.
    ///
    /// The cubic `u^3 - y u^2 + (k/beta) u - y/beta = 0` is depressed with
    /// `u = t + y/3` to `t^3 + p t + q = 0`. For `p < 0` the Cardano form with an expanded discriminant
    /// with the expanded (cancellation-free) discriminant is used. For `p >= 0` its
    /// `v - p/(3v)` cancels as `y -> 0`, so the hyperbolic form is used instead.
    #[inline]
    pub fn solve_centred(&self, y: T) -> T {
        let (alpha, beta) = (self.alpha, self.beta);
        let three = T::c(3.0);
        let k = T::one() + alpha;
        let p = k / beta - y * y / three;
        let q = y * (alpha - T::c(2.0)) / (three * beta) - T::c(2.0) * y * y * y / T::c(27.0);
        let t = if p >= T::zero() {
            if p == T::zero() {
                return y / three + (-q).cbrt();
            }
            // t = -2 sqrt(p/3) sinh(asinh(3q/(2p) sqrt(3/p)) / 3)
            let s = (p / three).sqrt();
            let arg = q / (T::c(2.0) * p * s) * three;
            T::c(-2.0) * s * (arg.asinh() / three).sinh()
        } else {
            let c1 = alpha * alpha + T::c(20.0) * alpha - T::c(8.0);
            let by2 = beta * y * y;
            let num = if alpha >= T::zero() {
                let m = by2 - c1 / T::c(8.0);
                let e = T::c(8.0) - alpha;
                T::c(4.0) * m * m + alpha * e * e * e / T::c(16.0)
            } else {
                T::c(4.0) * by2 * by2 - c1 * by2 + T::c(4.0) * k * k * k
            };
            let big_q = num / (T::c(108.0) * beta * beta * beta);
            let w = -q / T::c(2.0) - q.sign_nonneg() * big_q.max(T::zero()).sqrt();
            let v = w.cbrt();
            if v == T::zero() {
                T::zero()
            } else {
                v - p / (three * v)
            }
        };
        y / three + t
    }

    /// Derivatives at `x` with respect to `x` and the raw parameters.
    #[inline]
    pub fn partials(&self, x: T, f_raw: &mut [T], logd_raw: &mut [T]) -> ScalarPartials<T> {
        let (alpha, beta) = (self.alpha, self.beta);
        let u = x - self.c;
        let u2 = u * u;
        let bu2 = beta * u2;
        let d = T::one() + bu2;
        let d2 = d * d;
        let d3 = d2 * d;
        let n = T::one() - bu2;
        let f = x + alpha * u / d;
        let fp = T::one() + alpha * n / d2;
        let three_m = T::c(3.0) - bu2;
        let fpp = T::c(-2.0) * alpha * beta * u * three_m / d3;
        let inv_fp = T::one() / fp;
        // d f / d(alpha, beta, c)
        let f_alpha = u / d;
        let f_beta = -alpha * u2 * u / d2;
        let f_c = T::one() - fp;
        // d f' / d(alpha, beta, c)
        let fp_alpha = n / d2;
        let fp_beta = -alpha * u2 * three_m / d3;
        let fp_c = -fpp;
        f_raw[0] = f_alpha * self.dalpha_draw;
        f_raw[1] = f_beta * self.dbeta_draw;
        f_raw[2] = f_c;
        logd_raw[0] = fp_alpha * inv_fp * self.dalpha_draw;
        logd_raw[1] = fp_beta * inv_fp * self.dbeta_draw;
        logd_raw[2] = fp_c * inv_fp;
        ScalarPartials {
            f,
            f_x: fp,
            logd_x: fpp * inv_fp,
        }
    }
}
