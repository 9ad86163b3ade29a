//! One flow run on the phi^4 lattice: reverse-KL training from the action
//! alone on a backend, then the flow's samples measured and corrected.

use super::RunError;
use super::backend::{Backend, trainer};
use super::limits;
use crate::phi4::design::Design;
use crate::phi4::estimates::{FlowEstimates, estimate_with_flow};
use crate::rng::Rng;
use crate::target::Target;
use crate::target::phi4::Phi4;
use crate::train::TrainSettings;
use crate::train::config::{Precision, RunConfig, RunOutcome, RunPlan, train_planned};

/// What a flow run on the lattice produced.
pub struct Phi4FlowRun {
    pub outcome: RunOutcome,
    pub estimates: FlowEstimates,
}

/// The training run of `design` on `model`'s lattice.
fn run_config(
    model: &Phi4,
    design: &Design,
    steps: usize,
    settings: TrainSettings,
    precision: Precision,
    samples: usize,
) -> RunConfig {
    RunConfig {
        target: Target::Phi4(*model),
        flow: design.flow_for(model),
        steps,
        settings,
        precision,
        eval_samples: samples,
    }
}

/// Checks a flow run of `design` on `model` against the limits and the
/// machine's memory before anything starts (the HMC reference included).
pub fn check_flow_run(
    model: &Phi4,
    design: &Design,
    settings: &TrainSettings,
    samples: usize,
) -> Result<(), RunError> {
    let config = run_config(model, design, 0, settings.clone(), Precision::F64, samples);
    Ok(limits::check(&config)?)
}

/// Trains `design` on `model` on `backend` as `plan` says (schedule, time
/// limit, checkpoints) and measures it with `samples` flow samples (on the
/// CPU, in float64).
#[allow(clippy::too_many_arguments)] // one run's full description, as the CLI gives it
pub fn flow_run(
    model: &Phi4,
    design: &Design,
    steps: usize,
    settings: TrainSettings,
    precision: Precision,
    backend: Backend,
    samples: usize,
    plan: RunPlan,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<Phi4FlowRun, RunError> {
    let config = run_config(model, design, steps, settings, precision, samples);
    limits::check(&config)?;
    let outcome = train_planned(&config, trainer(&config, backend)?, plan, progress);
    let mut rng = Rng::seeded(config.settings.seed.wrapping_add(0x0e57_1a7e));
    let estimates = estimate_with_flow(outcome.model.as_flow(), model, samples, &mut rng)?;
    Ok(Phi4FlowRun { outcome, estimates })
}
