//! What training is, whatever trains: the divergence minimized ([`Loss`]),
//! the settings of a run, why training stops, and the [`Trainer`] interface
//! the CPU trainer and the GPU trainers share.

use crate::flow::FlowModel;
use crate::rng::Rng;
use crate::target::{Target, TargetKind};

/// Which divergence is minimized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// From target samples: `-mean log q(x)`.
    ForwardKl,
    /// From the target's unnormalized density: `mean(log q(x) - log p~(x))`, x ~ q.
    ReverseKl,
}

impl Loss {
    pub fn name(&self) -> &'static str {
        match self {
            Loss::ForwardKl => "forward-kl",
            Loss::ReverseKl => "reverse-kl",
        }
    }

    /// The loss a target allows.
    pub fn for_target(target: &Target) -> Loss {
        match target.kind() {
            TargetKind::Samples => Loss::ForwardKl,
            TargetKind::Energy => Loss::ReverseKl,
        }
    }
}

/// Why training stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TrainError {
    /// The loss or a gradient was NaN or infinite; the parameters were left as
    /// they were before the step.
    #[error(
        "training diverged at step {step}: the loss or its gradient is not finite (try a smaller learning rate); the last good parameters are kept"
    )]
    NonFinite { step: usize },
    /// The backend failed (e.g. the GPU device was lost); the last good state is kept.
    #[error("training stopped: {0}")]
    Backend(String),
}

/// Why a trainer cannot be set up, or take a model: the settings, the flow
/// and the target do not fit together.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SetupError {
    #[error("batch size must be at least 1")]
    EmptyBatch,
    #[error("learning rate must be positive and finite in {precision}, got {value}")]
    LearningRate { precision: &'static str, value: f64 },
    #[error("the flow is {flow}D but target '{target}' is {target_dim}D")]
    Dimension {
        flow: usize,
        target: &'static str,
        target_dim: usize,
    },
    #[error("target '{0}' has no sampler: train it by reverse KL")]
    NoSampler(&'static str),
    #[error("target '{0}' has no differentiable density: train it by forward KL")]
    NoDensityGradient(&'static str),
    #[error("the new model has a different structure")]
    DifferentStructure,
    #[error(transparent)]
    Flow(#[from] crate::flow::FlowError),
    /// A backend's own refusal (the GPU kernels' limits), with its reason.
    #[error("{0}")]
    Backend(String),
}

/// The message, where errors meet a person (the command line, the page).
impl From<SetupError> for String {
    fn from(e: SetupError) -> String {
        e.to_string()
    }
}

/// The message, where errors meet a person (the command line, the page).
impl From<TrainError> for String {
    fn from(e: TrainError) -> String {
        e.to_string()
    }
}

/// What every training backend offers.
pub trait Trainer {
    /// One optimizer step; returns the batch loss.
    fn step(&mut self) -> Result<f64, TrainError>;
    /// Steps applied so far.
    fn steps_done(&self) -> usize;
    /// The current model, in float64.
    fn model(&self) -> FlowModel<f64>;
    /// Replaces the parameters (e.g. edited by hand), keeping the optimizer state.
    fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), SetupError>;
    fn set_learning_rate(&mut self, lr: f64);
    /// Human-readable backend, e.g. "CPU (2 threads, f32)".
    fn backend(&self) -> String;
}

/// Everything a training run needs besides the model.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSettings {
    pub batch: usize,
    pub learning_rate: f64,
    pub seed: u64,
    pub loss: Loss,
    /// Worker threads (1 in the browser).
    pub threads: usize,
}

/// A step's batch, as every trainer draws it from its generator: `batch`
/// samples of the target (forward KL) or as many points of N(0, I) (reverse
/// KL), one row after another.
pub fn draw_batch(target: &Target, settings: &TrainSettings, rng: &mut Rng) -> Vec<f64> {
    let b = settings.batch;
    match settings.loss {
        Loss::ForwardKl => target.sample(b, rng).unwrap_or_default(),
        Loss::ReverseKl => (0..b * target.dim()).map(|_| rng.normal()).collect(),
    }
}

/// Threads the CPU trainer uses by default: all cores (none in the browser).
pub fn default_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        1
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}
