//! Rational-quadratic spline baseline (Durkan et al. 2019), `K` bins on `[-B, B]`,
//! identity with slope 1 outside. Raw order as in bijx (alphabetical):
//! heights (K), slopes (K - 1), widths (K).

use super::ScalarPartials;
use crate::real::{Real, sigmoid, softplus};

/// Smallest bin width/height (as a fraction of the interval) and knot slope.
pub const MIN_BIN: f64 = 1e-3;
pub const MIN_SLOPE: f64 = 1e-3;
/// Largest number of bins (keeps the knot arrays fixed-size).
pub const MAX_BINS: usize = 16;
/// Largest half-width of the interval (knot positions stay finite in float32).
pub const MAX_BOUND: f64 = 1e6;

/// Softplus scale that makes raw slope 0 give slope 1.
fn slope_scale() -> f64 {
    std::f64::consts::LN_2 / (1.0 - MIN_SLOPE)
}

/// The spline's shape: number of bins and half-width of the interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplineShape {
    pub bins: usize,
    pub bound: f64,
}

impl Default for SplineShape {
    fn default() -> Self {
        Self {
            bins: 8,
            bound: 5.0,
        }
    }
}

impl SplineShape {
    /// Checks the shape is one the fixed-size knot arrays and float32 can hold.
    pub fn validate(&self) -> Result<(), super::BijectionError> {
        if (2..=MAX_BINS).contains(&self.bins) && self.bound > 0.0 && self.bound <= MAX_BOUND {
            Ok(())
        } else {
            Err(super::BijectionError::SplineShape {
                max_bins: MAX_BINS,
                max_bound: MAX_BOUND,
            })
        }
    }

    pub fn n_raw(&self) -> usize {
        3 * self.bins - 1
    }
}

#[derive(Clone, Debug)]
pub struct Spline<T> {
    bins: usize,
    bound: T,
    /// softmax probabilities of widths and heights (for the chain rule)
    p_w: [T; MAX_BINS],
    p_h: [T; MAX_BINS],
    /// knot positions, K + 1 each
    xs: [T; MAX_BINS + 1],
    ys: [T; MAX_BINS + 1],
    /// knot slopes, K + 1 (the two ends are 1)
    ds: [T; MAX_BINS + 1],
    /// d slope / d raw slope for the interior knots
    dd_draw: [T; MAX_BINS + 1],
}

fn softmax<T: Real>(raw: &[T], out: &mut [T]) {
    let m = raw.iter().copied().fold(raw[0], T::max);
    let mut sum = T::zero();
    for (o, &r) in out.iter_mut().zip(raw) {
        *o = (r - m).exp();
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// Knots from softmax probabilities: positions -B + 2B cumsum(min + (1 - K min) p).
fn knots<T: Real>(p: &[T], bound: T, out: &mut [T]) {
    let k = p.len();
    let scale = T::one() - T::c(MIN_BIN * k as f64);
    out[0] = -bound;
    let mut acc = T::zero();
    for i in 0..k {
        acc += T::c(MIN_BIN) + scale * p[i];
        out[i + 1] = -bound + T::c(2.0) * bound * acc;
    }
    out[k] = bound;
}

/// Local derivatives of one bin evaluation.
struct Local<T> {
    /// d/d(x_k, W, y_k, H, d0, d1) of f and of log f'
    f: [T; 6],
    logd: [T; 6],
}

impl<T: Real> Spline<T> {
    pub fn from_raw(shape: SplineShape, raw: &[T]) -> Self {
        let k = shape.bins;
        let bound = T::c(shape.bound);
        let (heights, rest) = raw.split_at(k);
        let (slopes, widths) = rest.split_at(k - 1);
        let mut s = Self {
            bins: k,
            bound,
            p_w: [T::zero(); MAX_BINS],
            p_h: [T::zero(); MAX_BINS],
            xs: [T::zero(); MAX_BINS + 1],
            ys: [T::zero(); MAX_BINS + 1],
            ds: [T::one(); MAX_BINS + 1],
            dd_draw: [T::zero(); MAX_BINS + 1],
        };
        softmax(widths, &mut s.p_w[..k]);
        softmax(heights, &mut s.p_h[..k]);
        knots(&s.p_w[..k], bound, &mut s.xs[..=k]);
        knots(&s.p_h[..k], bound, &mut s.ys[..=k]);
        let sc = T::c(slope_scale());
        for i in 1..k {
            let r = slopes[i - 1];
            s.ds[i] = T::c(MIN_SLOPE) + softplus(sc * r) / sc;
            s.dd_draw[i] = sigmoid(sc * r);
        }
        s
    }

    /// Constrained view: knot positions and slopes (for the model file).
    pub fn knots(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let k = self.bins;
        let f = |v: &[T]| v.iter().map(|t| t.to_f64()).collect::<Vec<_>>();
        (f(&self.xs[..=k]), f(&self.ys[..=k]), f(&self.ds[..=k]))
    }

    fn bin_of(knots: &[T], v: T) -> usize {
        let k = knots.len() - 1;
        let mut i = 0;
        while i + 1 < k && v >= knots[i + 1] {
            i += 1;
        }
        i
    }

    fn inside(&self, v: T) -> bool {
        v > -self.bound && v < self.bound
    }

    /// `(f, log f', local derivatives)` in bin `i`.
    fn eval_bin(&self, i: usize, x: T, with_grad: bool) -> (T, T, T, T, Option<Local<T>>) {
        let two = T::c(2.0);
        let w = self.xs[i + 1] - self.xs[i];
        let h = self.ys[i + 1] - self.ys[i];
        let s = h / w;
        let (d0, d1) = (self.ds[i], self.ds[i + 1]);
        let xi = (x - self.xs[i]) / w;
        let e = xi * (T::one() - xi);
        let num = h * (s * xi * xi + d0 * e);
        let den = s + (d0 + d1 - two * s) * e;
        let r = num / den;
        let one_m = T::one() - xi;
        let n2 = d1 * xi * xi + two * s * e + d0 * one_m * one_m;
        let fp = s * s * n2 / (den * den);
        let f = self.ys[i] + r;
        let logd = fp.ln();
        // derivatives with respect to the primitives (xi, s, H, d0, d1)
        let num_xi = h * (two * s * xi + d0 * (T::one() - two * xi));
        let den_xi = (d0 + d1 - two * s) * (T::one() - two * xi);
        let n2_xi = two * d1 * xi + two * s * (T::one() - two * xi) - two * d0 * one_m;
        let r_xi = (num_xi - r * den_xi) / den;
        let l_xi = n2_xi / n2 - two * den_xi / den;
        let f_x = r_xi / w;
        let logd_x = l_xi / w;
        if !with_grad {
            return (f, logd, f_x, logd_x, None);
        }
        let r_s = (h * xi * xi - r * (T::one() - two * e)) / den;
        let r_h = (s * xi * xi + d0 * e) / den;
        let r_d0 = (h * e - r * e) / den;
        let r_d1 = -r * e / den;
        let l_s = two / s + two * e / n2 - two * (T::one() - two * e) / den;
        let l_d0 = one_m * one_m / n2 - two * e / den;
        let l_d1 = xi * xi / n2 - two * e / den;
        // chain (xi, s) to (x_k, W, H)
        let chain = |g_xi: T, g_s: T, g_h: T, g_yk: T, g_d0: T, g_d1: T| -> [T; 6] {
            [
                -g_xi / w,
                -g_xi * xi / w - g_s * s / w,
                g_yk,
                g_h + g_s / w,
                g_d0,
                g_d1,
            ]
        };
        let local = Local {
            f: chain(r_xi, r_s, r_h, T::one(), r_d0, r_d1),
            logd: chain(l_xi, l_s, T::zero(), T::zero(), l_d0, l_d1),
        };
        (f, logd, f_x, logd_x, Some(local))
    }

    #[inline]
    pub fn x_from_z(&self, x: T) -> (T, T) {
        if !self.inside(x) {
            return (x, T::zero());
        }
        let i = Self::bin_of(&self.xs[..=self.bins], x);
        let (f, logd, _, _, _) = self.eval_bin(i, x, false);
        (f, logd)
    }

    /// `f(x0 + d) - y0`, `y0 = f(x0)`: within one bin, `R(xi2) - R(xi1) =
    /// H s (xi2 - xi1) [(s - d0)(xi1 + xi2) + d0 + sigma xi1 xi2] / (D1 D2)` with
    /// `sigma = d0 + d1 - 2s` and `D` the rational-quadratic denominator.
    pub fn diff(&self, x0: T, y0: T, d: T) -> T {
        let x1 = x0 + d;
        if !self.inside(x0) && !self.inside(x1) {
            return d;
        }
        let k = self.bins;
        let i = Self::bin_of(&self.xs[..=k], x0);
        if !self.inside(x0) || !self.inside(x1) || i != Self::bin_of(&self.xs[..=k], x1) {
            return self.x_from_z(x1).0 - y0;
        }
        let w = self.xs[i + 1] - self.xs[i];
        let h = self.ys[i + 1] - self.ys[i];
        let s = h / w;
        let (d0, d1) = (self.ds[i], self.ds[i + 1]);
        let sigma = d0 + d1 - T::c(2.0) * s;
        let xi1 = (x0 - self.xs[i]) / w;
        let xi2 = (x1 - self.xs[i]) / w;
        let den = |xi: T| s + sigma * xi * (T::one() - xi);
        let bracket = (s - d0) * (xi1 + xi2) + d0 + sigma * xi1 * xi2;
        h * s * (d / w) * bracket / (den(xi1) * den(xi2))
    }

    #[inline]
    pub fn z_from_x(&self, y: T) -> (T, T) {
        if !self.inside(y) {
            return (y, T::zero());
        }
        let i = Self::bin_of(&self.ys[..=self.bins], y);
        let two = T::c(2.0);
        let w = self.xs[i + 1] - self.xs[i];
        let h = self.ys[i + 1] - self.ys[i];
        let s = h / w;
        let (d0, d1) = (self.ds[i], self.ds[i + 1]);
        let dy = y - self.ys[i];
        let sum = d0 + d1 - two * s;
        let qa = h * (s - d0) + dy * sum;
        let qb = h * d0 - dy * sum;
        let qc = -s * dy;
        let disc = (qb * qb - T::c(4.0) * qa * qc).max(T::zero());
        let xi = (two * qc / (-qb - disc.sqrt()))
            .max(T::zero())
            .min(T::one());
        let x = self.xs[i] + xi * w;
        let (_, logd, _, _, _) = self.eval_bin(i, x, false);
        (x, logd)
    }

    pub fn partials(&self, x: T, f_raw: &mut [T], logd_raw: &mut [T]) -> ScalarPartials<T> {
        f_raw.iter_mut().for_each(|v| *v = T::zero());
        logd_raw.iter_mut().for_each(|v| *v = T::zero());
        if !self.inside(x) {
            return ScalarPartials {
                f: x,
                f_x: T::one(),
                logd_x: T::zero(),
            };
        }
        let k = self.bins;
        let i = Self::bin_of(&self.xs[..=k], x);
        let (f, _, f_x, logd_x, local) = self.eval_bin(i, x, true);
        let Some(local) = local else {
            unreachable!("eval_bin returns derivatives when asked")
        };
        for (g, out) in [(&local.f, &mut *f_raw), (&local.logd, &mut *logd_raw)] {
            self.chain_to_raw(i, g, out);
        }
        ScalarPartials { f, f_x, logd_x }
    }

    /// Chains derivatives with respect to (x_i, W_i, y_i, H_i, d_i, d_i+1) to raw.
    fn chain_to_raw(&self, i: usize, g: &[T; 6], out: &mut [T]) {
        let k = self.bins;
        let two_b = T::c(2.0) * self.bound;
        let scale = T::one() - T::c(MIN_BIN * k as f64);
        // d/d(width_j) before softmax: x_i depends on widths j < i, W_i on width i.
        let (heights_out, rest) = out.split_at_mut(k);
        let (slopes_out, widths_out) = rest.split_at_mut(k - 1);
        for (probs, g_pos, g_len, dst) in [
            (&self.p_w, g[0], g[1], widths_out),
            (&self.p_h, g[2], g[3], heights_out),
        ] {
            let grad_w = |j: usize| -> T {
                let mut v = T::zero();
                if j < i {
                    v += g_pos * two_b;
                }
                if j == i {
                    v += g_len * two_b;
                }
                v
            };
            let mean: T = (0..k).map(|j| grad_w(j) * probs[j]).sum();
            for j in 0..k {
                dst[j] = scale * probs[j] * (grad_w(j) - mean);
            }
        }
        if i >= 1 {
            slopes_out[i - 1] = g[4] * self.dd_draw[i];
        }
        if i + 1 < k {
            slopes_out[i] = g[5] * self.dd_draw[i + 1];
        }
    }
}
