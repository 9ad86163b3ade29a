//! A whole training run, whatever trains it: what defines it ([`RunConfig`]),
//! its initial model and CPU trainer, and the loop that trains for a number of
//! steps with progress reports ([`train_with`]).

use super::{CpuTrainer, SetupError, TrainError, TrainSettings, Trainer};
use crate::flow::FlowError;
use crate::flow::{FlowConfig, FlowModel};
use crate::rng::Rng;
use crate::target::Target;
use std::time::Instant;

/// Float precision of the CPU trainer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Precision {
    F32,
    F64,
}

/// Everything that defines a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub target: Target,
    pub flow: FlowConfig,
    pub steps: usize,
    pub settings: TrainSettings,
    pub precision: Precision,
    /// Fresh samples for the held-out metrics.
    pub eval_samples: usize,
}

/// What a run produced.
pub struct RunOutcome {
    pub model: FlowModel<f64>,
    pub steps: usize,
    pub seconds: f64,
    pub final_loss: f64,
    /// Loss every `loss_every` steps.
    pub losses: Vec<f64>,
    pub loss_every: usize,
    pub stopped: Option<TrainError>,
    pub backend: String,
}

/// The initial model of a run (seeded by the run's seed).
pub fn initial_model(config: &RunConfig) -> Result<FlowModel<f64>, FlowError> {
    let mut rng = Rng::seeded(config.settings.seed);
    config.flow.build(config.target.dim(), &mut rng)
}

/// Trains on the CPU; `progress(step, loss)` is called after every step.
pub fn train(
    config: &RunConfig,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<RunOutcome, SetupError> {
    Ok(train_with(config, cpu_trainer(config)?, progress))
}

/// The CPU trainer of a run, in its precision.
pub fn cpu_trainer(config: &RunConfig) -> Result<Box<dyn Trainer>, SetupError> {
    let model = initial_model(config)?;
    // The Z2-equivariant radial flow keeps its centre at the origin.
    let frozen = if config.flow.fixed_centre() {
        0..config.target.dim()
    } else {
        0..0
    };
    Ok(match config.precision {
        Precision::F32 => {
            let mut t =
                CpuTrainer::<f32>::new(model, config.target.clone(), config.settings.clone())?;
            t.freeze(frozen);
            Box::new(t)
        }
        Precision::F64 => {
            let mut t =
                CpuTrainer::<f64>::new(model, config.target.clone(), config.settings.clone())?;
            t.freeze(frozen);
            Box::new(t)
        }
    })
}

/// Trains with the given trainer (any backend).
pub fn train_with(
    config: &RunConfig,
    mut trainer: Box<dyn Trainer>,
    progress: &mut dyn FnMut(usize, f64),
) -> RunOutcome {
    let loss_every = (config.steps / 500).max(1);
    let mut losses = Vec::new();
    let mut final_loss = f64::NAN;
    let mut stopped = None;
    let start = Instant::now();
    for step in 1..=config.steps {
        match trainer.step() {
            Ok(loss) => {
                final_loss = loss;
                if step % loss_every == 0 {
                    losses.push(loss);
                }
                progress(step, loss);
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    RunOutcome {
        model: trainer.model(),
        steps: trainer.steps_done(),
        seconds: start.elapsed().as_secs_f64(),
        final_loss,
        losses,
        loss_every,
        stopped,
        backend: trainer.backend(),
    }
}
