//! The phi^4 observables every flow result is compared with, each with its
//! error bar and autocorrelation time: <|M|>/V, <M^2>/V, the susceptibility,
//! the connected two-point function, and the magnetization histogram; from a
//! Markov chain or from weighted independent samples.

use crate::mcmc::{Estimate, estimate};
use crate::stats::{histogram, weighted_histogram};
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

/// Bins of the magnetization histogram.
pub const BINS: usize = 40;
