//! A whole training run, whatever trains it: what defines it ([`RunConfig`]),
//! its initial model and CPU trainer, and the loop that trains for a number of
//! steps with progress reports ([`train_with`]).

use super::{CpuTrainer, SetupError, TrainError, TrainSettings, Trainer};
use crate::flow::FlowError;
use crate::flow::{FlowConfig, FlowModel};
use crate::rng::Rng;
use crate::target::Target;
use std::time::{Duration, Instant};

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

/// How the learning rate moves over a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// The learning rate throughout.
    #[default]
    Constant,
    /// Half a cosine from the learning rate down to 1% of it at the run's end
    /// (its last step, or its time limit, whichever comes first).
    Cosine,
}

impl Schedule {
    pub fn name(&self) -> &'static str {
        match self {
            Schedule::Constant => "constant",
            Schedule::Cosine => "cosine",
        }
    }

    pub fn parse(name: &str) -> Result<Schedule, String> {
        match name {
            "constant" => Ok(Schedule::Constant),
            "cosine" => Ok(Schedule::Cosine),
            other => Err(format!(
                "the learning-rate schedule must be constant or cosine, got '{other}'"
            )),
        }
    }

    /// The factor of the base learning rate at `done` (0 to 1) through the run.
    pub fn factor(&self, done: f64) -> f64 {
        const FLOOR: f64 = 0.01;
        match self {
            Schedule::Constant => 1.0,
            Schedule::Cosine => {
                let done = done.clamp(0.0, 1.0);
                FLOOR + (1.0 - FLOOR) * 0.5 * (1.0 + (std::f64::consts::PI * done).cos())
            }
        }
    }
}

/// How a long run trains: its schedule, a wall-clock limit and checkpoints.
pub struct RunPlan<'a> {
    pub schedule: Schedule,
    /// Stop when this much time has passed, even with steps left.
    pub time_limit: Option<Duration>,
    /// Steps between checkpoints (0: none).
    pub checkpoint_every: usize,
    /// Given each checkpoint's step and model (and the final one).
    pub checkpoint: &'a mut dyn FnMut(usize, &FlowModel<f64>),
}

/// Trains with the given trainer (any backend).
pub fn train_with(
    config: &RunConfig,
    trainer: Box<dyn Trainer>,
    progress: &mut dyn FnMut(usize, f64),
) -> RunOutcome {
    let mut no_checkpoint = |_: usize, _: &FlowModel<f64>| {};
    let plan = RunPlan {
        schedule: Schedule::Constant,
        time_limit: None,
        checkpoint_every: 0,
        checkpoint: &mut no_checkpoint,
    };
    train_planned(config, trainer, plan, progress)
}

/// Trains as `plan` says: up to `config.steps` steps (fewer when its time
/// limit comes first), the learning rate following its schedule, and
/// checkpoints every `checkpoint_every` steps and at the end.
pub fn train_planned(
    config: &RunConfig,
    mut trainer: Box<dyn Trainer>,
    plan: RunPlan,
    progress: &mut dyn FnMut(usize, f64),
) -> RunOutcome {
    let loss_every = (config.steps / 500).max(1);
    let mut losses = Vec::new();
    let mut final_loss = f64::NAN;
    let mut stopped = None;
    let start = Instant::now();
    let base_lr = config.settings.learning_rate;
    for step in 1..=config.steps {
        let elapsed = start.elapsed();
        if plan.time_limit.is_some_and(|limit| elapsed >= limit) {
            break;
        }
        if plan.schedule != Schedule::Constant {
            let by_steps = (step - 1) as f64 / config.steps as f64;
            let by_time = plan
                .time_limit
                .map_or(0.0, |limit| elapsed.as_secs_f64() / limit.as_secs_f64());
            trainer.set_learning_rate(base_lr * plan.schedule.factor(by_steps.max(by_time)));
        }
        match trainer.step() {
            Ok(loss) => {
                final_loss = loss;
                if step % loss_every == 0 {
                    losses.push(loss);
                }
                progress(step, loss);
                if plan.checkpoint_every > 0 && step % plan.checkpoint_every == 0 {
                    (plan.checkpoint)(step, &trainer.model());
                }
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    let model = trainer.model();
    if plan.checkpoint_every > 0 && stopped.is_none() {
        (plan.checkpoint)(trainer.steps_done(), &model);
    }
    RunOutcome {
        model,
        steps: trainer.steps_done(),
        seconds: start.elapsed().as_secs_f64(),
        final_loss,
        losses,
        loss_every,
        stopped,
        backend: trainer.backend(),
    }
}
