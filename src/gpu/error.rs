//! What can go wrong on the GPU: no device, a flow or size the kernels cannot
//! train (the run then trains on the CPU, saying why), or the device failing.

use super::shader::ShaderError;
use crate::train::SetupError;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// No adapter (with a hint what to install or use).
    #[error("{hint} (no GPU adapter: {reason})")]
    NoAdapter { hint: &'static str, reason: String },
    #[error("the GPU adapter '{adapter}' refused a device: {reason}")]
    DeviceRefused { adapter: String, reason: String },
    /// The kernels cannot train or draw this flow, target or shape.
    #[error("{0}")]
    Unsupported(String),
    #[error(
        "batch {batch} needs {need_mb} MB of activations on the GPU, more than this device allows ({max_mb} MB); use a smaller batch"
    )]
    BatchTooLarge {
        batch: usize,
        need_mb: u64,
        max_mb: u64,
    },
    /// The device failed while running (lost, a validation error, a failed
    /// read-back).
    #[error("{0}")]
    Device(String),
    #[error(transparent)]
    Shader(#[from] ShaderError),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl GpuError {
    /// A refusal of what the kernels cannot do.
    pub fn unsupported(why: impl Into<String>) -> Self {
        Self::Unsupported(why.into())
    }
}

/// The message, where errors meet a person (the command line, the page).
impl From<GpuError> for String {
    fn from(e: GpuError) -> String {
        e.to_string()
    }
}
