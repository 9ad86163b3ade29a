//! What a run is started with, the work a GPU task does after its steps, and
//! what a frame of training hands back to the page.

use crate::app::playground::picture::Picture;
use crate::flow::FlowModel;
use crate::gpu::GpuTrainer;
use crate::target::Target;
use crate::train::TrainSettings;
use crate::train::metrics::ModelMeasures;
use crate::train::watch::Divergence;
use std::future::Future;

/// Work a GPU task does after its training steps: reading what the views need
/// from the trainer's kernels. `step` is the run's step count at that point.
pub trait GpuJob: 'static {
    type Output: 'static;
    fn run(
        self,
        trainer: &mut GpuTrainer,
        step: usize,
    ) -> impl Future<Output = Result<Self::Output, String>>;
}

/// What a run is started with.
pub struct HostSpec {
    pub model: FlowModel<f64>,
    pub target: Target,
    pub settings: TrainSettings,
    /// hold the first `dim` parameters (a radial flow's centre) fixed
    pub fixed_centre: bool,
}

/// What training did since the last frame.
pub struct Progress<O> {
    /// (step, batch loss) of each step taken
    pub losses: Vec<(usize, f64)>,
    /// what the GPU job produced
    pub output: Option<O>,
    /// why training stopped, for the user
    pub stopped: Option<String>,
    /// the divergence that stopped it, when one did
    pub divergence: Option<Divergence>,
    /// seconds the steps took
    pub seconds: f64,
    /// a worker sent newer parameters ([`super::TrainerHost::model`])
    pub fresh_model: bool,
    /// the views a worker drew ([`super::TrainerHost::draw_in_worker`])
    pub drawn: Option<WorkerPicture>,
    /// the flow samples a worker pushed ([`super::TrainerHost::sample_in_worker`])
    pub sampled: Option<WorkerSamples>,
}

/// The views a worker drew.
pub struct WorkerPicture {
    pub picture: Picture,
    /// the metrics measured with it, where they were asked for
    pub measures: Option<ModelMeasures>,
    /// the maps a cut of the page's model was cut after, for a cut's drawing
    pub cut: Option<usize>,
    /// seconds the drawing took
    pub seconds: f64,
}

/// Flow samples a worker pushed from the page's latent fields.
pub struct WorkerSamples {
    /// the run's step they were pushed at
    pub step: usize,
    /// the fields, n x V
    pub fields: Vec<f64>,
    pub log_q: Vec<f64>,
}

impl<O> Default for Progress<O> {
    fn default() -> Self {
        Self {
            losses: Vec::new(),
            output: None,
            stopped: None,
            divergence: None,
            seconds: 0.0,
            fresh_model: false,
            drawn: None,
            sampled: None,
        }
    }
}
