//! Where a run trains: the CPU trainer in the run's precision, or the GPU's
//! WGSL kernels through wgpu (native command line only).

use crate::train::Trainer;
use crate::train::config::{RunConfig, cpu_trainer, initial_model};

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
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            other => Err(format!("--backend must be cpu or gpu, got '{other}'")),
        }
    }
}

/// The trainer of a run on `backend`.
pub fn trainer(config: &RunConfig, backend: Backend) -> Result<Box<dyn Trainer>, String> {
    match backend {
        Backend::Cpu => cpu_trainer(config),
        Backend::Gpu => gpu_trainer(config),
    }
}

/// The GPU trainer of a run (radial, coupling and lattice flows).
#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
pub fn gpu_trainer(config: &RunConfig) -> Result<Box<dyn Trainer>, String> {
    if config.flow.fixed_centre() {
        return Err(
            "the Z2 radial flow keeps its centre fixed, which only the CPU trainer does; use --backend cpu"
                .into(),
        );
    }
    let model = initial_model(config)?;
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    let trainer =
        crate::gpu::GpuTrainer::new(ctx, model, config.target.clone(), config.settings.clone())?;
    Ok(Box::new(trainer))
}

/// The GPU trainer of a run: none in this build.
#[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
pub fn gpu_trainer(_config: &RunConfig) -> Result<Box<dyn Trainer>, String> {
    Err("this build has no GPU backend for the command line (built without the 'gpu' feature); use --backend cpu".into())
}
