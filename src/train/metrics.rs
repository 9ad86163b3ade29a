//! Sample-quality metrics: held-out NLL, reverse KL, ESS/N and independent
//! Metropolis-Hastings acceptance, all computed in float64 and in log space.

use crate::flow::Flow;
use crate::rng::Rng;
use crate::stats::{ess_fraction, imh_acceptance, log_normal, logsumexp};
use crate::target::Target;

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

/// What the playground measures of a model beside its views, at a step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelMeasures {
    /// mean -log q of held-out target samples
    pub held_out_nll: Option<f64>,
    /// KL(q || p) and ESS/N from flow samples (energy targets)
    pub reverse_kl: Option<f64>,
    pub ess: Option<f64>,
}

/// Measures `flow` at run step `step`: the mean -log q of `held_out`
/// (none when empty), and with `reverse_target` the reverse KL and ESS/N of
/// `samples` flow samples, drawn with a seed of the step (the same numbers
/// wherever they are computed: the page's thread or a run's worker).
/// Values that are not finite are none.
pub fn model_measures(
    flow: &dyn Flow<f64>,
    held_out: &[f64],
    reverse_target: Option<&Target>,
    samples: usize,
    step: usize,
) -> ModelMeasures {
    let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
    let mut m = ModelMeasures::default();
    if !held_out.is_empty() {
        let lq = log_q(flow, held_out);
        m.held_out_nll = finite(Some(-lq.iter().sum::<f64>() / lq.len() as f64));
    }
    if let Some(target) = reverse_target {
        let mut rng = Rng::seeded(0x6d65_7472 ^ step as u64);
        if let Some(r) = reverse_metrics(flow, target, samples, &mut rng) {
            m.reverse_kl = finite(Some(r.reverse_kl));
            m.ess = finite(Some(r.ess));
        }
    }
    m
}

/// KL(p || q) between two densities given as log values on the same grid
/// cells, each normalized over the grid (cells where p is 0 add nothing).
pub fn grid_kl(log_p: &[f64], log_q: &[f64]) -> Option<f64> {
    let (zp, zq) = (logsumexp(log_p), logsumexp(log_q));
    if !(zp.is_finite() && zq.is_finite()) {
        return None;
    }
    let kl = log_p
        .iter()
        .zip(log_q)
        .filter(|(p, _)| p.is_finite())
        .map(|(&p, &q)| (p - zp).exp() * ((p - zp) - (q - zq)))
        .sum::<f64>();
    kl.is_finite().then_some(kl.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_kl_is_zero_for_equal_densities_and_matches_the_formula() {
        let log_p = [0.5f64.ln(), 0.5f64.ln(), f64::NEG_INFINITY];
        assert!(grid_kl(&log_p, &[1.0, 1.0, 1.0]).unwrap() > 0.0);
        // unnormalized q equal to p up to a constant: KL 0
        let shifted: Vec<f64> = [0.5f64.ln(), 0.5f64.ln(), -50.0]
            .iter()
            .map(|v| v + 3.0)
            .collect();
        assert!(grid_kl(&log_p, &shifted).unwrap() < 1e-12);
        // p = (1/2, 1/2, 0), q = (1/4, 1/4, 1/2): KL = log 2
        let log_q = [0.25f64.ln(), 0.25f64.ln(), 0.5f64.ln()];
        assert!((grid_kl(&log_p, &log_q).unwrap() - 2f64.ln()).abs() < 1e-12);
    }
}
