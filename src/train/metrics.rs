//! Sample-quality metrics: held-out NLL, reverse KL, ESS/N and independent
//! Metropolis-Hastings acceptance, all computed in float64 and in log space.

use crate::flow::Flow;
use crate::rng::Rng;
use crate::target::Target;
use std::f64::consts::TAU;

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

/// `log q(x)` for a batch (density direction).
pub fn log_q(flow: &dyn Flow<f64>, x: &[f64]) -> Vec<f64> {
    let d = flow.dim();
    let n = x.len() / d;
    let mut z = vec![0.0; x.len()];
    let mut ld = vec![0.0; n];
    flow.z_from_x(x, &mut z, &mut ld);
    (0..n)
        .map(|i| log_normal(&z[i * d..(i + 1) * d]) + ld[i])
        .collect()
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

/// Held-out negative log-likelihood (nats) on `n` fresh target samples.
pub fn held_out_nll(flow: &dyn Flow<f64>, target: &Target, n: usize, rng: &mut Rng) -> Option<f64> {
    let x = target.sample(n, rng)?;
    let lq = log_q(flow, &x);
    Some(-lq.iter().sum::<f64>() / n as f64)
}

/// Metrics of a flow against an energy target from `n` flow samples.
#[derive(Clone, Copy, Debug)]
pub struct ReverseMetrics {
    /// KL(q || p), using the known log Z or else its importance-sampling estimate
    pub reverse_kl: f64,
    /// mean(log q - log p~): the training loss, KL - log Z
    pub loss: f64,
    pub log_z: f64,
    pub log_z_known: bool,
    pub ess: f64,
    pub acceptance: f64,
}

pub fn reverse_metrics(
    flow: &dyn Flow<f64>,
    target: &Target,
    n: usize,
    rng: &mut Rng,
) -> Option<ReverseMetrics> {
    let d = flow.dim();
    let z: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
    let mut x = vec![0.0; n * d];
    let mut ld = vec![0.0; n];
    flow.x_from_z(&z, &mut x, &mut ld);
    let mut log_w = Vec::with_capacity(n);
    for i in 0..n {
        let lq = log_normal(&z[i * d..(i + 1) * d]) - ld[i];
        let (lp, _) = target.log_density_grad(&x[i * d..(i + 1) * d])?;
        log_w.push(lp - lq);
    }
    let loss = -log_w.iter().sum::<f64>() / n as f64;
    let (log_z, log_z_known) = match target.log_z() {
        Some(v) => (v, true),
        None => (logsumexp(&log_w) - (n as f64).ln(), false),
    };
    Some(ReverseMetrics {
        reverse_kl: loss + log_z,
        loss,
        log_z,
        log_z_known,
        ess: ess_fraction(&log_w),
        acceptance: imh_acceptance(&log_w, rng),
    })
}
