//! Hamiltonian Monte Carlo for `p(x) ~ exp(-S(x))`: Gaussian momenta,
//! leapfrog trajectories of fixed length, and a Metropolis test on the energy
//! error, so the chain samples `p` exactly whatever the step size. During
//! thermalization the step size adapts towards an acceptance of 0.8.

use crate::rng::Rng;

/// A potential `S(x)` with its gradient.
pub trait Potential {
    fn dim(&self) -> usize;
    /// `S(x)`, with `dS/dx` written into `grad`.
    fn potential_grad(&self, x: &[f64], grad: &mut [f64]) -> f64;
}

/// Why a chain cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HmcError {
    #[error("HMC needs at least one leapfrog step and a positive step size")]
    Settings,
}

/// The message, where errors meet a person (the command line, the page).
impl From<HmcError> for String {
    fn from(e: HmcError) -> String {
        e.to_string()
    }
}

/// How the chain runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HmcSettings {
    /// trajectories measured
    pub trajectories: usize,
    /// trajectories discarded first (the step size adapts during them)
    pub thermalize: usize,
    /// leapfrog steps per trajectory
    pub leapfrog: usize,
    /// the initial step size (the trajectory is `leapfrog * step` long)
    pub step: f64,
    pub seed: u64,
}

impl Default for HmcSettings {
    fn default() -> Self {
        Self {
            trajectories: 10_000,
            thermalize: 1_000,
            leapfrog: 10,
            step: 0.1,
            seed: 0,
        }
    }
}

/// What the chain did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HmcStats {
    /// acceptance rate over the measured trajectories
    pub acceptance: f64,
    /// the step size used for them
    pub step: f64,
}

/// One chain. `measure` sees the configuration after every measured
/// trajectory; `progress` is called with (trajectories done, total).
pub fn run<P: Potential>(
    target: &P,
    settings: &HmcSettings,
    mut measure: impl FnMut(&[f64]),
    mut progress: impl FnMut(usize, usize),
) -> Result<HmcStats, HmcError> {
    if settings.leapfrog == 0 || !(settings.step > 0.0 && settings.step.is_finite()) {
        return Err(HmcError::Settings);
    }
    let d = target.dim();
    let mut rng = Rng::seeded(settings.seed ^ 0x686d_6300);
    // a cold start: all zero (in the broken phase the chain finds a mode)
    let mut x = vec![0.0; d];
    let mut grad = vec![0.0; d];
    let mut s = target.potential_grad(&x, &mut grad);
    let mut step = settings.step;
    let mut accepted = 0usize;
    let total = settings.thermalize + settings.trajectories;
    let mut trial = vec![0.0; d];
    let mut trial_grad = vec![0.0; d];
    let mut momentum = vec![0.0; d];
    for k in 0..total {
        for p in momentum.iter_mut() {
            *p = rng.normal();
        }
        let kinetic0: f64 = 0.5 * momentum.iter().map(|p| p * p).sum::<f64>();
        trial.copy_from_slice(&x);
        trial_grad.copy_from_slice(&grad);
        let mut trial_s = s;
        // leapfrog: half kick, (drift, kick) ..., the last kick halved
        for (p, g) in momentum.iter_mut().zip(&trial_grad) {
            *p -= 0.5 * step * g;
        }
        for i in 0..settings.leapfrog {
            for (q, p) in trial.iter_mut().zip(&momentum) {
                *q += step * p;
            }
            trial_s = target.potential_grad(&trial, &mut trial_grad);
            let kick = if i + 1 == settings.leapfrog { 0.5 } else { 1.0 };
            for (p, g) in momentum.iter_mut().zip(&trial_grad) {
                *p -= kick * step * g;
            }
        }
        let kinetic1: f64 = 0.5 * momentum.iter().map(|p| p * p).sum::<f64>();
        let delta_h = (trial_s + kinetic1) - (s + kinetic0);
        let accept = delta_h.is_finite() && rng.uniform() < (-delta_h).exp();
        if accept {
            std::mem::swap(&mut x, &mut trial);
            std::mem::swap(&mut grad, &mut trial_grad);
            s = trial_s;
        }
        if k < settings.thermalize {
            // nudges that balance at 80% acceptance: 0.8 ln 1.01 = 0.2 ln(1 / 0.96)
            step *= if accept { 1.01 } else { 0.96 };
        } else {
            accepted += usize::from(accept);
            measure(&x);
        }
        if (k + 1) % 1000 == 0 || k + 1 == total {
            progress(k + 1, total);
        }
    }
    Ok(HmcStats {
        acceptance: accepted as f64 / settings.trajectories.max(1) as f64,
        step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A correlated 2D Gaussian: HMC reproduces its covariance.
    struct Gaussian;

    impl Potential for Gaussian {
        fn dim(&self) -> usize {
            2
        }

        fn potential_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
            // S = (x0^2 - 1.2 x0 x1 + x1^2) / 2 ; covariance = inverse of [[1, -0.6], [-0.6, 1]]
            grad[0] = x[0] - 0.6 * x[1];
            grad[1] = x[1] - 0.6 * x[0];
            0.5 * (x[0] * x[0] - 1.2 * x[0] * x[1] + x[1] * x[1])
        }
    }

    #[test]
    fn hmc_samples_a_gaussian_exactly() {
        let settings = HmcSettings {
            trajectories: 40_000,
            thermalize: 1000,
            leapfrog: 5,
            step: 0.3,
            seed: 3,
        };
        let (mut xx, mut xy) = (Vec::new(), Vec::new());
        let stats = run(
            &Gaussian,
            &settings,
            |x| {
                xx.push(x[0] * x[0]);
                xy.push(x[0] * x[1]);
            },
            |_, _| {},
        )
        .unwrap();
        assert!(
            stats.acceptance > 0.6 && stats.acceptance < 0.95,
            "{stats:?}"
        );
        let det = 1.0 - 0.36;
        let (var, cov) = (1.0 / det, 0.6 / det);
        let (e_xx, e_xy) = (super::super::estimate(&xx), super::super::estimate(&xy));
        assert!(
            (e_xx.mean - var).abs() < 4.0 * e_xx.error,
            "{e_xx:?} vs {var}"
        );
        assert!(
            (e_xy.mean - cov).abs() < 4.0 * e_xy.error,
            "{e_xy:?} vs {cov}"
        );
    }
}
