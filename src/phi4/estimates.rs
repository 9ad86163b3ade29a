//! Exact phi^4 estimates from a trained flow: its samples corrected by
//! independent Metropolis-Hastings (IMH: a Markov chain whose proposals are
//! the flow's samples, accepted with probability `min(1, w'/w)`) and by
//! importance weights `w = p~/q`, with the sample-quality metrics (ESS/N, IMH
//! acceptance, reverse KL) and the mode-collapse measure: the fraction of raw
//! flow samples with M > 0, exactly 1/2 under the Z2-symmetric target.

use super::EstimateError;
use super::observables::{BINS, Measurements, Phi4Observables};
use crate::flow::Flow;
use crate::rng::Rng;
use crate::stats::histogram;
use crate::stats::{ess_fraction, log_normal, logsumexp};
use crate::target::phi4::Phi4;

/// Flow samples drawn at a time (bounds the memory of the flow's pass).
const CHUNK: usize = 512;

/// What a flow's samples say about the theory.
#[derive(Clone, Debug)]
pub struct FlowEstimates {
    pub samples: usize,
    /// `(sum w)^2 / (N sum w^2)`
    pub ess: f64,
    /// acceptance rate of the IMH chain
    pub acceptance: f64,
    /// `mean(log q - log p~) = KL(q || p) - log Z` (the training loss)
    pub loss: f64,
    /// importance-sampling estimate of `log Z`
    pub log_z: f64,
    /// `KL(q || p)` with that `log Z` (a lower estimate of the true one)
    pub reverse_kl: f64,
    /// fraction of raw flow samples with M > 0
    pub positive_fraction: f64,
    /// observables of the IMH chain (errors from its autocorrelation times)
    pub imh: Phi4Observables,
    /// importance-weighted observables
    pub reweighted: Phi4Observables,
    /// histogram of M/V of the raw (uncorrected) flow samples
    pub flow_histogram: Vec<(f64, f64)>,
}

/// Draws `n` samples from `flow` and measures them (n >= 2).
pub fn estimate_with_flow(
    flow: &dyn Flow<f64>,
    model: &Phi4,
    n: usize,
    rng: &mut Rng,
) -> Result<FlowEstimates, EstimateError> {
    let v = model.volume();
    if flow.dim() != v {
        return Err(EstimateError::Dimension {
            flow: flow.dim(),
            sites: v,
        });
    }
    let (fields, log_q) = flow_samples(flow, n, rng);
    estimate_from_samples(model, &fields, &log_q, rng)
}

/// `n` samples of `flow` (x_from_z of standard normals): the fields, n x
/// dim, and their `log q`.
pub fn flow_samples(flow: &dyn Flow<f64>, n: usize, rng: &mut Rng) -> (Vec<f64>, Vec<f64>) {
    let latent: Vec<f64> = (0..n * flow.dim()).map(|_| rng.normal()).collect();
    flow_samples_from(flow, &latent)
}

/// The samples of `flow` pushed from `latent` (n x dim standard normals,
/// drawn elsewhere: a lab run's worker pushes the page's): the fields, n x
/// dim, and their `log q`, as [`flow_samples`] gives them.
pub fn flow_samples_from(flow: &dyn Flow<f64>, latent: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let v = flow.dim().max(1);
    let n = latent.len() / v;
    let mut fields = Vec::with_capacity(n * v);
    let mut log_q = Vec::with_capacity(n);
    for z in latent[..n * v].chunks(CHUNK * v) {
        let m = z.len() / v;
        let mut x = vec![0.0; m * v];
        let mut ld = vec![0.0; m];
        flow.x_from_z(z, &mut x, &mut ld);
        fields.extend_from_slice(&x);
        log_q.extend((0..m).map(|i| log_normal(&z[i * v..(i + 1) * v]) - ld[i]));
    }
    (fields, log_q)
}

/// Measures flow samples drawn elsewhere (the GPU's): `fields` (n x V) with
/// their `log q` (n >= 2); `rng` draws the IMH chain's acceptances.
pub fn estimate_from_samples(
    model: &Phi4,
    fields: &[f64],
    log_q: &[f64],
    rng: &mut Rng,
) -> Result<FlowEstimates, EstimateError> {
    let v = model.volume();
    let n = log_q.len();
    if fields.len() != n * v {
        return Err(EstimateError::FieldCount {
            values: fields.len(),
            samples: n,
            sites: v,
        });
    }
    if n < 2 {
        return Err(EstimateError::TooFewSamples);
    }
    let mut raw = Measurements::new(v, n);
    let mut log_w = Vec::with_capacity(n);
    for (phi, lq) in fields.chunks(v).zip(log_q) {
        let lw = -model.action(phi) - lq;
        // a sample the flow sent to infinity has no weight
        log_w.push(if lw.is_nan() { f64::NEG_INFINITY } else { lw });
        raw.record(model, phi);
    }
    let finite = log_w.iter().filter(|l| l.is_finite()).count();
    if finite == 0 {
        return Err(EstimateError::ZeroWeight);
    }
    let loss = -log_w.iter().sum::<f64>() / n as f64;
    let log_z = logsumexp(&log_w) - (n as f64).ln();
    // IMH over the samples in their (independent, random) order
    let mut chain = Measurements::new(v, n);
    let mut current = 0usize;
    let mut accepted = 0usize;
    for j in 0..n {
        if j > 0 && (log_w[j] - log_w[current]).exp() >= rng.uniform() {
            current = j;
            accepted += 1;
        }
        chain.m.push(raw.m[current]);
        for (series, source) in chain.two_point.iter_mut().zip(&raw.two_point) {
            series.push(source[current]);
        }
    }
    let positive = raw.m.iter().filter(|&&m| m > 0.0).count();
    Ok(FlowEstimates {
        samples: n,
        ess: ess_fraction(&log_w),
        acceptance: accepted as f64 / (n - 1) as f64,
        loss,
        log_z,
        reverse_kl: loss + log_z,
        positive_fraction: positive as f64 / n as f64,
        imh: chain.chain_observables(),
        reweighted: raw.weighted_observables(&log_w),
        flow_histogram: histogram(&raw.m, BINS),
    })
}
