//! The phi^4 reference: an HMC chain on the lattice and the observables every
//! flow result is compared with, each with its error bar and autocorrelation
//! time: <|M|>/V, <M^2>/V, the susceptibility, the connected two-point
//! function, and the magnetization histogram.

use super::hmc::{self, HmcSettings, HmcStats};
use super::{Estimate, estimate};
use crate::target::phi4::Phi4;

/// The phi^4 observables of a set of configurations, each with its error bar.
#[derive(Clone, Debug)]
pub struct Phi4Observables {
    /// <M>/V (0 by symmetry where the chain tunnels between the modes)
    pub m: Estimate,
    /// <|M|>/V
    pub abs_m: Estimate,
    /// <M^2>/V
    pub m2: Estimate,
    /// the susceptibility `chi = sum_x G_c(x) = <M^2>/V - <M>^2/V`; its
    /// error is that of <M^2>/V (the other term's is of higher order)
    pub chi: Estimate,
    /// the connected two-point function `G_c(x)` for every displacement x
    /// (row-major over the L x L displacements)
    pub two_point: Vec<Estimate>,
    /// histogram of M/V: bin centres and probability densities
    pub histogram: Vec<(f64, f64)>,
}

/// What one configuration contributes: M/V and `G(x)` for every displacement.
#[derive(Clone, Debug, Default)]
pub struct Measurements {
    pub m: Vec<f64>,
    pub two_point: Vec<Vec<f64>>,
}

impl Measurements {
    pub fn new(volume: usize, capacity: usize) -> Self {
        Self {
            m: Vec::with_capacity(capacity),
            two_point: vec![Vec::with_capacity(capacity); volume],
        }
    }

    /// Measures one configuration.
    pub fn record(&mut self, model: &Phi4, phi: &[f64]) {
        self.m
            .push(Phi4::magnetization(phi) / model.volume() as f64);
        for (series, value) in self.two_point.iter_mut().zip(model.two_point(phi)) {
            series.push(value);
        }
    }

    /// The observables of a Markov chain, each error from its own
    /// integrated autocorrelation time.
    pub fn chain_observables(&self) -> Phi4Observables {
        self.observables(estimate)
    }

    /// The observables of independent configurations weighted by `w = exp(log_w)`
    /// (self-normalized importance sampling; the error by the delta method).
    pub fn weighted_observables(&self, log_w: &[f64]) -> Phi4Observables {
        let top = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = log_w.iter().map(|l| (l - top).exp()).collect();
        let total: f64 = w.iter().sum();
        let weighted = |series: &[f64]| {
            let mean = series.iter().zip(&w).map(|(x, w)| w * x).sum::<f64>() / total;
            let var = series
                .iter()
                .zip(&w)
                .map(|(x, w)| (w * (x - mean)).powi(2))
                .sum::<f64>();
            Estimate {
                mean,
                error: var.sqrt() / total,
                tau_int: 0.5,
            }
        };
        let mut obs = self.observables(weighted);
        obs.histogram = weighted_histogram(&self.m, &w, BINS);
        obs
    }

    fn observables(&self, mean_of: impl Fn(&[f64]) -> Estimate) -> Phi4Observables {
        let v = self.two_point.len() as f64;
        let m = &self.m;
        let m_est = mean_of(m);
        let abs: Vec<f64> = m.iter().map(|x| x.abs()).collect();
        // <M^2>/V = V <(M/V)^2>
        let m2: Vec<f64> = m.iter().map(|x| v * x * x).collect();
        let m2_est = mean_of(&m2);
        let chi = Estimate {
            mean: m2_est.mean - v * m_est.mean * m_est.mean,
            ..m2_est
        };
        let shift = m_est.mean * m_est.mean;
        let two_point = self
            .two_point
            .iter()
            .map(|series| {
                let e = mean_of(series);
                Estimate {
                    mean: e.mean - shift,
                    ..e
                }
            })
            .collect();
        Phi4Observables {
            m: m_est,
            abs_m: mean_of(&abs),
            m2: m2_est,
            chi,
            two_point,
            histogram: histogram(m, BINS),
        }
    }
}

/// The HMC reference: the chain's statistics and its observables (the
/// magnetization histogram made symmetric by the action's phi -> -phi symmetry).
#[derive(Clone, Debug)]
pub struct Phi4Reference {
    pub stats: HmcStats,
    pub observables: Phi4Observables,
}

/// Bins of the magnetization histogram.
pub const BINS: usize = 40;

/// Runs the chain and measures. `progress` gets (trajectories done, total).
pub fn reference(
    model: &Phi4,
    settings: &HmcSettings,
    progress: impl FnMut(usize, usize),
) -> Result<Phi4Reference, String> {
    let mut measured = Measurements::new(model.volume(), settings.trajectories);
    let stats = hmc::run(model, settings, |phi| measured.record(model, phi), progress)?;
    let mut observables = measured.chain_observables();
    // The action is even in phi, so every configuration's mirror image is as
    // likely: the histogram counts both, which shows the two modes of the
    // broken phase even where the chain stays in one (as HMC does at large L).
    let mirrored: Vec<f64> = measured.m.iter().flat_map(|&m| [m, -m]).collect();
    observables.histogram = histogram(&mirrored, BINS);
    Ok(Phi4Reference { stats, observables })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::phi4::Couplings;

    /// The free field (lambda = 0) is solvable: HMC's two-point function and
    /// <M^2>/V agree with the closed form within their error bars.
    #[test]
    fn hmc_reproduces_the_free_field() {
        let model = Phi4::new(
            6,
            Couplings {
                m2: 1.0,
                lambda: 0.0,
            },
        )
        .unwrap();
        let settings = HmcSettings {
            trajectories: 20_000,
            thermalize: 1_000,
            leapfrog: 8,
            step: 0.2,
            seed: 1,
        };
        let run = reference(&model, &settings, |_, _| {}).unwrap();
        assert!(run.stats.acceptance > 0.6, "{:?}", run.stats);
        let r = &run.observables;
        let exact = model.free_two_point().unwrap();
        for (x, (e, g)) in r.two_point.iter().zip(&exact).enumerate() {
            assert!(
                (e.mean - g).abs() < 4.0 * e.error,
                "G at displacement {x}: {e:?} vs exact {g}"
            );
        }
        // <M^2>/V = sum_x G(x) = 1 / (2 m^2)
        assert!((r.m2.mean - 0.5).abs() < 4.0 * r.m2.error, "{:?}", r.m2);
        assert!(r.m.mean.abs() < 4.0 * r.m.error);
        let total: f64 =
            r.histogram.iter().map(|(_, d)| d).sum::<f64>() * (r.histogram[1].0 - r.histogram[0].0);
        assert!((total - 1.0).abs() < 1e-9);
    }

    /// Deep in the broken phase the magnetization is bimodal.
    #[test]
    fn the_broken_phase_has_a_large_magnetization() {
        let model = Phi4::new(
            6,
            Couplings {
                m2: -4.0,
                lambda: 1.0,
            },
        )
        .unwrap();
        let settings = HmcSettings {
            trajectories: 3_000,
            thermalize: 500,
            ..HmcSettings::default()
        };
        let r = reference(&model, &settings, |_, _| {}).unwrap().observables;
        // the classical minimum: phi^2 = -m^2 / (2 lambda) = 2, |phi| ~ 1.4
        assert!(r.abs_m.mean > 1.0, "{:?}", r.abs_m);
    }
}
