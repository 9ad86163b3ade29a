//! One GPU trainer for every flow the GPU trains: the CLI and the app pick the
//! kernels by the model's kind here.

use super::{GpuContext, GpuCouplingTrainer, GpuRadialTrainer};
use crate::flow::FlowModel;
use crate::target::Target;
use crate::train::{TrainError, TrainSettings, Trainer};

/// A radial or coupling flow's training state on the GPU.
pub enum GpuTrainer {
    Radial(Box<GpuRadialTrainer>),
    Coupling(Box<GpuCouplingTrainer>),
}

impl GpuTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, String> {
        match model {
            FlowModel::Radial(_) => Ok(Self::Radial(Box::new(GpuRadialTrainer::new(
                ctx, model, target, settings,
            )?))),
            FlowModel::Coupling(_) => Ok(Self::Coupling(Box::new(GpuCouplingTrainer::new(
                ctx, model, target, settings,
            )?))),
            FlowModel::Elementwise(_) => Err(
                "the GPU trains radial and coupling flows; use --backend cpu for element-wise flows"
                    .into(),
            ),
        }
    }

    fn inner(&self) -> &dyn Trainer {
        match self {
            Self::Radial(t) => t.as_ref(),
            Self::Coupling(t) => t.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Trainer {
        match self {
            Self::Radial(t) => t.as_mut(),
            Self::Coupling(t) => t.as_mut(),
        }
    }

    /// Mean loss and gradient for a given batch, without a step (parity tests).
    pub fn loss_and_grad(&mut self, points: &[f32]) -> Result<(f64, Vec<f64>), String> {
        match self {
            Self::Radial(t) => t.loss_and_grad(points),
            Self::Coupling(t) => t.loss_and_grad(points),
        }
    }

    /// `log q(x)` at every point (n x d).
    pub fn log_q(&mut self, points: &[f32]) -> Result<Vec<f32>, String> {
        match self {
            Self::Radial(t) => t.log_q(points),
            Self::Coupling(t) => t.log_q(points),
        }
    }

    /// Latent points through `x_from_z`: per point x and `log |det dx/dz|`.
    pub fn x_from_z(&mut self, latent: &[f32]) -> Result<Vec<f32>, String> {
        match self {
            Self::Radial(t) => t.x_from_z(latent),
            Self::Coupling(t) => t.x_from_z(latent),
        }
    }

    /// Compute dispatches in one training step.
    pub fn dispatches_per_step(&self) -> usize {
        match self {
            Self::Radial(_) => 3,
            Self::Coupling(t) => t.dispatches_per_step(),
        }
    }
}

impl Trainer for GpuTrainer {
    fn step(&mut self) -> Result<f64, TrainError> {
        self.inner_mut().step()
    }

    fn steps_done(&self) -> usize {
        self.inner().steps_done()
    }

    fn model(&self) -> FlowModel<f64> {
        self.inner().model()
    }

    fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        self.inner_mut().set_model(model)
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner_mut().set_learning_rate(lr);
    }

    fn backend(&self) -> String {
        self.inner().backend()
    }
}
