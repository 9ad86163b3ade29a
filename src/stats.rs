//! The shared numerics of densities and samples, in float64: log-sum-exp, the
//! standard normal's log density, importance-sampling efficiency (ESS/N and
//! independent Metropolis-Hastings acceptance) and histograms. Every module
//! above uses these, so each exists once.

use crate::rng::Rng;
use std::f64::consts::TAU;

/// `log sum exp(v)` without overflow (`-inf` for an empty or all `-inf` slice).
pub fn logsumexp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// `log N(z; 0, I)`.
pub fn log_normal(z: &[f64]) -> f64 {
    -0.5 * z.iter().map(|v| v * v).sum::<f64>() - 0.5 * z.len() as f64 * TAU.ln()
}

/// ESS/N from log importance weights: `(sum w)^2 / (N sum w^2)`.
pub fn ess_fraction(log_w: &[f64]) -> f64 {
    let n = log_w.len() as f64;
    let twice: Vec<f64> = log_w.iter().map(|v| 2.0 * v).collect();
    (2.0 * logsumexp(log_w) - logsumexp(&twice) - n.ln()).exp()
}

/// Acceptance rate of independent Metropolis-Hastings over the proposals in
/// order: x' replaces x with probability `min(1, w(x')/w(x))`.
pub fn imh_acceptance(log_w: &[f64], rng: &mut Rng) -> f64 {
    if log_w.len() < 2 {
        return 0.0;
    }
    let mut current = log_w[0];
    let mut accepted = 0usize;
    for &proposal in &log_w[1..] {
        if (proposal - current).exp() >= rng.uniform() {
            current = proposal;
            accepted += 1;
        }
    }
    accepted as f64 / (log_w.len() - 1) as f64
}

/// A histogram of `values` weighted by `weights` (normalized to a density).
pub fn weighted_histogram(values: &[f64], weights: &[f64], bins: usize) -> Vec<(f64, f64)> {
    let plain = histogram(values, bins);
    if plain.len() < 2 {
        return plain;
    }
    let width = plain[1].0 - plain[0].0;
    let lo = plain[0].0 - 0.5 * width;
    let mut mass = vec![0.0; bins];
    for (&x, &w) in values.iter().zip(weights) {
        mass[(((x - lo) / width) as usize).min(bins - 1)] += w;
    }
    let total: f64 = mass.iter().sum();
    plain
        .iter()
        .zip(&mass)
        .map(|(&(c, _), &m)| (c, m / (total * width)))
        .collect()
}

/// A normalized histogram of `values` over their range: (bin centre, density).
pub fn histogram(values: &[f64], bins: usize) -> Vec<(f64, f64)> {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    // (also catches a range of NaN)
    if values.is_empty() || hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return Vec::new();
    }
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &x in values {
        counts[(((x - lo) / width) as usize).min(bins - 1)] += 1;
    }
    let n = values.len() as f64;
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| (lo + (i as f64 + 0.5) * width, c as f64 / (n * width)))
        .collect()
}

/// `log N(x; 0, sd^2)` of one coordinate.
pub fn log_normal_1d(x: f64, sd: f64) -> f64 {
    -0.5 * (x / sd).powi(2) - sd.ln() - 0.5 * TAU.ln()
}
