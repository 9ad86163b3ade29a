//! One GPU trainer for every flow the GPU trains: the CLI and the app pick the
//! kernels by the model's kind here.

use super::optimizer::{self, FlowKernels};
use super::{GpuContext, GpuCouplingTrainer, GpuLatticeTrainer, GpuRadialTrainer};
use crate::flow::FlowModel;
use crate::gpu::GpuError;
use crate::target::Target;
#[cfg(not(target_arch = "wasm32"))]
use crate::train::Trainer;
use crate::train::{SetupError, TrainError, TrainSettings};

/// A radial, coupling or lattice flow's training state on the GPU.
pub enum GpuTrainer {
    Radial(Box<GpuRadialTrainer>),
    Coupling(Box<GpuCouplingTrainer>),
    Lattice(Box<GpuLatticeTrainer>),
}

impl GpuTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, GpuError> {
        match model {
            FlowModel::Radial(_) => Ok(Self::Radial(Box::new(GpuRadialTrainer::new(
                ctx, model, target, settings,
            )?))),
            FlowModel::Coupling(_) => Ok(Self::Coupling(Box::new(GpuCouplingTrainer::new(
                ctx, model, target, settings,
            )?))),
            FlowModel::Lattice(_) => Ok(Self::Lattice(Box::new(GpuLatticeTrainer::new(
                ctx, model, target, settings,
            )?))),
            FlowModel::Elementwise(_) => Err(GpuError::unsupported(
                "the GPU trains radial, coupling and lattice flows; use --backend cpu for element-wise flows",
            )),
        }
    }

    /// The flow's kernels, with the optimizer they share.
    fn kernels(&self) -> &dyn FlowKernels {
        match self {
            Self::Radial(t) => t.as_ref(),
            Self::Coupling(t) => t.as_ref(),
            Self::Lattice(t) => t.as_ref(),
        }
    }

    fn kernels_mut(&mut self) -> &mut dyn FlowKernels {
        match self {
            Self::Radial(t) => t.as_mut(),
            Self::Coupling(t) => t.as_mut(),
            Self::Lattice(t) => t.as_mut(),
        }
    }

    /// One optimizer step on the GPU; resolves with the batch loss.
    pub async fn step_async(&mut self) -> Result<f64, TrainError> {
        optimizer::step_async(self.kernels_mut()).await
    }

    /// `n` steps with one read-back of their losses; on a non-finite loss the
    /// state before them is restored.
    pub async fn steps_async(&mut self, n: usize) -> Result<Vec<f64>, TrainError> {
        optimizer::steps_async(self.kernels_mut(), n).await
    }

    /// The current model, read back from the GPU.
    pub async fn model_async(&self) -> FlowModel<f64> {
        optimizer::model_async(self.kernels()).await
    }

    /// Mean loss and gradient for a given batch, without a step (parity tests).
    pub async fn loss_and_grad_async(
        &mut self,
        points: &[f32],
    ) -> Result<(f64, Vec<f64>), GpuError> {
        optimizer::loss_and_grad_async(self.kernels(), points).await
    }

    /// `log q(x)` at every point (n x d).
    pub async fn log_q_async(&mut self, points: &[f32]) -> Result<Vec<f32>, GpuError> {
        match self {
            Self::Radial(t) => t.log_q_async(points).await,
            Self::Coupling(t) => t.log_q_async(points).await,
            Self::Lattice(t) => t.log_q_async(points).await,
        }
    }

    /// Latent points through `x_from_z`: per point x and `log |det dx/dz|`.
    pub async fn x_from_z_async(&mut self, latent: &[f32]) -> Result<Vec<f32>, GpuError> {
        match self {
            Self::Radial(t) => t.x_from_z_async(latent).await,
            Self::Coupling(t) => t.x_from_z_async(latent).await,
            Self::Lattice(t) => t.x_from_z_async(latent).await,
        }
    }

    /// Records `log q` of `n` points in `points` into `log_q`, both GPU buffers
    /// (`STORAGE | COPY_SRC` and `STORAGE | COPY_DST`): the heatmap's data,
    /// never copied through the CPU.
    pub fn encode_log_q(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        points: &wgpu::Buffer,
        log_q: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        match self {
            Self::Radial(t) => t.encode_log_q(encoder, points, log_q, n),
            Self::Coupling(t) => t.encode_log_q(encoder, points, log_q, n),
            Self::Lattice(_) => Err(GpuError::unsupported("a lattice flow has no 2D picture")),
        }
    }

    /// Records `n` latent points pushed through `x_from_z` (x and log det per
    /// point) into `pushed`: samples and grid polylines, drawn from the GPU.
    pub fn encode_x_from_z(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        latent: &wgpu::Buffer,
        pushed: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        match self {
            Self::Radial(t) => t.encode_x_from_z(encoder, latent, pushed, n),
            Self::Coupling(t) => t.encode_x_from_z(encoder, latent, pushed, n),
            Self::Lattice(_) => Err(GpuError::unsupported("a lattice flow has no 2D picture")),
        }
    }

    /// [`Self::loss_and_grad_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn loss_and_grad(&mut self, points: &[f32]) -> Result<(f64, Vec<f64>), GpuError> {
        pollster::block_on(self.loss_and_grad_async(points))
    }

    /// [`Self::log_q_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn log_q(&mut self, points: &[f32]) -> Result<Vec<f32>, GpuError> {
        pollster::block_on(self.log_q_async(points))
    }

    /// [`Self::x_from_z_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn x_from_z(&mut self, latent: &[f32]) -> Result<Vec<f32>, GpuError> {
        pollster::block_on(self.x_from_z_async(latent))
    }

    /// The device the trainer runs on (for buffers the app shares with it).
    pub fn context(&self) -> &GpuContext {
        &self.kernels().optimizer().ctx
    }

    /// Compute dispatches in one training step.
    pub fn dispatches_per_step(&self) -> usize {
        match self {
            Self::Radial(_) => 3,
            Self::Coupling(t) => t.dispatches_per_step(),
            Self::Lattice(t) => t.dispatches_per_step(),
        }
    }

    /// Human-readable backend, e.g. "GPU (llvmpipe, f32)".
    pub fn backend(&self) -> String {
        self.kernels().optimizer().backend()
    }

    /// Replaces the parameters (same structure), keeping the optimizer state.
    pub fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), SetupError> {
        optimizer::set_model(self.kernels_mut(), model)
    }

    /// The learning rate of the following steps.
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.kernels_mut().optimizer_mut().settings.learning_rate = lr;
    }

    /// Steps applied so far.
    pub fn steps_done(&self) -> usize {
        self.kernels().optimizer().steps
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Trainer for GpuTrainer {
    fn step(&mut self) -> Result<f64, TrainError> {
        pollster::block_on(self.step_async())
    }

    fn steps_done(&self) -> usize {
        GpuTrainer::steps_done(self)
    }

    fn model(&self) -> FlowModel<f64> {
        pollster::block_on(self.model_async())
    }

    fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), SetupError> {
        GpuTrainer::set_model(self, model)
    }

    fn set_learning_rate(&mut self, lr: f64) {
        GpuTrainer::set_learning_rate(self, lr);
    }

    fn backend(&self) -> String {
        GpuTrainer::backend(self)
    }
}
