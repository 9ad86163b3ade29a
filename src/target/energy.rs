//! Unnormalized log-densities for reverse-KL training, with their gradients:
//! bijx's 1D demo target and the normflows 2D "energy" targets.

use crate::real::{sigmoid, softplus};
use std::f64::consts::{PI, TAU};

/// bijx's 1D demo: `sin(5x) exp(-5x^2) + 2 cos(10x) - 0.2 x^4`.
pub fn poly1d(x: f64) -> (f64, f64) {
    let e = (-5.0 * x * x).exp();
    let v = (5.0 * x).sin() * e + 2.0 * (10.0 * x).cos() - 0.2 * x.powi(4);
    let g = 5.0 * (5.0 * x).cos() * e
        - 10.0 * x * (5.0 * x).sin() * e
        - 20.0 * (10.0 * x).sin()
        - 0.8 * x.powi(3);
    (v, g)
}

/// log Z of [`poly1d`] by the midpoint rule on [-6, 6] (the tails beyond are < e^-250).
pub fn poly1d_log_z() -> f64 {
    let n = 200_000;
    let h = 12.0 / n as f64;
    let s: f64 = (0..n)
        .map(|i| poly1d(-6.0 + (i as f64 + 0.5) * h).0.exp())
        .sum();
    (s * h).ln()
}

/// normflows' TwoMoons energy.
pub fn two_moons(x: &[f64]) -> (f64, [f64; 2]) {
    let r = (x[0] * x[0] + x[1] * x[1]).sqrt().max(1e-300);
    let a = x[0].abs();
    let sg = if x[0] < 0.0 { -1.0 } else { 1.0 };
    let k = 4.0 / 0.09;
    let v = -0.5 * ((r - 2.0) / 0.2).powi(2) - 0.5 * ((a - 2.0) / 0.3).powi(2) + softplus(-k * a);
    let dr = -(r - 2.0) / 0.04;
    let da = -(a - 2.0) / 0.09 - k * sigmoid(-k * a);
    (v, [dr * x[0] / r + da * sg, dr * x[1] / r])
}

/// Log-sum-exp of `terms` with the softmax weights (for mixture gradients).
fn logsumexp_weights(terms: &[f64], weights: &mut [f64]) -> f64 {
    let m = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut s = 0.0;
    for (w, t) in weights.iter_mut().zip(terms) {
        *w = (t - m).exp();
        s += *w;
    }
    for w in weights.iter_mut() {
        *w /= s;
    }
    m + s.ln()
}

/// Eight equal Gaussians at `2 (sin 2 pi i/8, cos 2 pi i/8)`, sd `(2/3) sin(pi/8)` (normalized).
pub fn circular_gmm(x: &[f64]) -> (f64, [f64; 2]) {
    let sd = 2.0 / 3.0 * (PI / 8.0).sin();
    let mut terms = [0.0; 8];
    let mut diffs = [[0.0; 2]; 8];
    for i in 0..8 {
        let t = TAU * i as f64 / 8.0;
        let d = [x[0] - 2.0 * t.sin(), x[1] - 2.0 * t.cos()];
        diffs[i] = d;
        terms[i] =
            -0.5 * (d[0] * d[0] + d[1] * d[1]) / (sd * sd) - (TAU * sd * sd).ln() - 8f64.ln();
    }
    let mut w = [0.0; 8];
    let v = logsumexp_weights(&terms, &mut w);
    let mut g = [0.0; 2];
    for i in 0..8 {
        g[0] -= w[i] * diffs[i][0] / (sd * sd);
        g[1] -= w[i] * diffs[i][1] / (sd * sd);
    }
    (v, g)
}

/// `n` rings of radius `2 (i + 1) / n`, sd `1 / (4 n)` (unnormalized, as normflows).
pub fn ring_mixture(x: &[f64], n: usize) -> (f64, [f64; 2]) {
    let r = (x[0] * x[0] + x[1] * x[1]).sqrt().max(1e-300);
    let s = 1.0 / (4.0 * n as f64);
    let terms: Vec<f64> = (0..n)
        .map(|i| -0.5 * ((r - 2.0 * (i + 1) as f64 / n as f64) / s).powi(2))
        .collect();
    let mut w = vec![0.0; n];
    let v = logsumexp_weights(&terms, &mut w);
    let dr: f64 = (0..n)
        .map(|i| -w[i] * (r - 2.0 * (i + 1) as f64 / n as f64) / (s * s))
        .sum();
    (v, [dr * x[0] / r, dr * x[1] / r])
}
