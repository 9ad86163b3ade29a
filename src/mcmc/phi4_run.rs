//! The phi^4 reference: an HMC chain on the lattice and the observables every
//! flow result is compared with, each with its error bar and autocorrelation
//! time: <|M|>/V, <M^2>/V, the susceptibility, the connected two-point
//! function, and the magnetization histogram.

use super::hmc::{self, HmcSettings, HmcStats};
use super::{Estimate, estimate};
use crate::target::phi4::Phi4;

/// The observables of one chain.
#[derive(Clone, Debug)]
pub struct Phi4Reference {
    pub stats: HmcStats,
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

/// Bins of the magnetization histogram.
const BINS: usize = 40;

/// Runs the chain and measures. `progress` gets (trajectories done, total).
pub fn reference(
    model: &Phi4,
    settings: &HmcSettings,
    progress: impl FnMut(usize, usize),
) -> Result<Phi4Reference, String> {
    let v = model.volume() as f64;
    let mut m = Vec::with_capacity(settings.trajectories);
    let mut g: Vec<Vec<f64>> = vec![Vec::with_capacity(settings.trajectories); model.volume()];
    let stats = hmc::run(
        model,
        settings,
        |phi| {
            m.push(Phi4::magnetization(phi) / v);
            for (series, value) in g.iter_mut().zip(model.two_point(phi)) {
                series.push(value);
            }
        },
        progress,
    )?;
    let m_est = estimate(&m);
    let abs: Vec<f64> = m.iter().map(|x| x.abs()).collect();
    // <M^2>/V = V <(M/V)^2>
    let m2: Vec<f64> = m.iter().map(|x| v * x * x).collect();
    let m2_est = estimate(&m2);
    let chi = Estimate {
        mean: m2_est.mean - v * m_est.mean * m_est.mean,
        ..m2_est
    };
    let shift = m_est.mean * m_est.mean;
    let two_point = g
        .iter()
        .map(|series| {
            let e = estimate(series);
            Estimate {
                mean: e.mean - shift,
                ..e
            }
        })
        .collect();
    Ok(Phi4Reference {
        stats,
        m: m_est,
        abs_m: estimate(&abs),
        m2: m2_est,
        chi,
        two_point,
        histogram: histogram(&m, BINS),
    })
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
        let r = reference(&model, &settings, |_, _| {}).unwrap();
        assert!(r.stats.acceptance > 0.6, "{:?}", r.stats);
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
        let r = reference(&model, &settings, |_, _| {}).unwrap();
        // the classical minimum: phi^2 = -m^2 / (2 lambda) = 2, |phi| ~ 1.4
        assert!(r.abs_m.mean > 1.0, "{:?}", r.abs_m);
    }
}
