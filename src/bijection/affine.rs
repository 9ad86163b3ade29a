//! Affine baseline: `f(x) = e^s x + t` with the bounded log-scale `s = 2 tanh(raw_s / 2)`.

use super::{ParamSpec, ScalarPartials};
use crate::real::Real;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec::new("s", "-2 < s < 2 (log-scale)", -2.0, 2.0),
    ParamSpec::new("t", "any real", f64::NEG_INFINITY, f64::INFINITY),
];

#[derive(Clone, Copy, Debug)]
pub struct Affine<T> {
    pub s: T,
    pub t: T,
    scale: T,
    ds_draw: T,
}

impl<T: Real> Affine<T> {
    pub fn from_raw(raw: &[T]) -> Self {
        let th = (raw[0] / T::c(2.0)).tanh();
        let s = T::c(2.0) * th;
        Self {
            s,
            t: raw[1],
            scale: s.exp(),
            ds_draw: T::one() - th * th,
        }
    }

    pub fn raw_from_constrained(v: &[f64]) -> Vec<f64> {
        vec![2.0 * (v[0] / 2.0).atanh(), v[1]]
    }

    pub fn constrained(&self) -> Vec<f64> {
        vec![self.s.to_f64(), self.t.to_f64()]
    }

    /// `(s, t, e^s, d s / d raw)`, for packing several layers lane by lane.
    pub fn parts(&self) -> [T; 4] {
        [self.s, self.t, self.scale, self.ds_draw]
    }

    #[inline]
    pub fn x_from_z(&self, x: T) -> (T, T) {
        (self.scale * x + self.t, self.s)
    }

    /// `f(x0 + d) - f(x0)`.
    #[inline]
    pub fn diff(&self, d: T) -> T {
        self.scale * d
    }

    #[inline]
    pub fn z_from_x(&self, y: T) -> (T, T) {
        ((y - self.t) / self.scale, self.s)
    }

    #[inline]
    pub fn partials(&self, x: T, f_raw: &mut [T], logd_raw: &mut [T]) -> ScalarPartials<T> {
        let y = self.scale * x + self.t;
        f_raw[0] = self.scale * x * self.ds_draw;
        f_raw[1] = T::one();
        logd_raw[0] = self.ds_draw;
        logd_raw[1] = T::zero();
        ScalarPartials {
            f: y,
            f_x: self.scale,
            logd_x: T::zero(),
        }
    }
}
