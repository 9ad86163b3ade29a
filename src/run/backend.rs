//! Where a run trains: the CPU trainer in the run's precision, or the GPU's
//! WGSL kernels through wgpu (native command line only).

use super::RunError;
use crate::train::Trainer;
use crate::train::config::{RunConfig, cpu_trainer};

/// Where a run trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    /// the CPU trainer, in the run's precision
    Cpu,
    /// WGSL kernels through wgpu, in float32
    Gpu,
}

impl Backend {
    /// `cpu` or `gpu`, as the CLI spells them.
    pub fn parse(name: &str) -> Result<Self, RunError> {
        match name {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            other => Err(RunError::UnknownBackend(other.to_string())),
        }
    }
}

/// The trainer of a run on `backend`.
pub fn trainer(config: &RunConfig, backend: Backend) -> Result<Box<dyn Trainer>, RunError> {
    match backend {
        Backend::Cpu => Ok(cpu_trainer(config)?),
        Backend::Gpu => gpu_trainer(config),
    }
}

/// The GPU trainer of a run (radial, coupling and lattice flows).
#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
pub fn gpu_trainer(config: &RunConfig) -> Result<Box<dyn Trainer>, RunError> {
    if config.flow.fixed_centre() {
        return Err(RunError::FixedCentreOnGpu);
    }
    let model = crate::train::config::initial_model(config)?;
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    let trainer =
        crate::gpu::GpuTrainer::new(ctx, model, config.target.clone(), config.settings.clone())?;
    Ok(Box::new(trainer))
}

/// The GPU trainer of a run: none in this build.
#[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
pub fn gpu_trainer(_config: &RunConfig) -> Result<Box<dyn Trainer>, RunError> {
    Err(RunError::NoGpuBackend)
}
