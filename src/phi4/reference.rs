//! The HMC reference on the lattice: a Hamiltonian Monte Carlo chain on the
//! phi^4 action and its observables, which every flow is measured against.

use super::observables::{BINS, Measurements, Phi4Observables};
use crate::mcmc::hmc::{self, HmcError, HmcSettings, HmcStats, Potential};
use crate::stats::histogram;
use crate::target::phi4::Phi4;

/// The action as HMC's potential.
impl Potential for Phi4 {
    fn dim(&self) -> usize {
        self.volume()
    }

    fn potential_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.action_grad(x, grad)
    }
}

/// The HMC reference: the chain's statistics and its observables (the
/// magnetization histogram made symmetric by the action's phi -> -phi symmetry).
#[derive(Clone, Debug)]
pub struct Phi4Reference {
    pub stats: HmcStats,
    pub observables: Phi4Observables,
}

/// Runs the chain and measures. `progress` gets (trajectories done, total).
pub fn reference(
    model: &Phi4,
    settings: &HmcSettings,
    progress: impl FnMut(usize, usize),
) -> Result<Phi4Reference, HmcError> {
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
