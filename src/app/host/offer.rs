//! Where a run is offered to train: on the page's GPU, or on the CPU with the
//! reason, typed so the page never reads it out of message text.

use crate::gpu::{GpuContext, GpuError};

/// Why a run trains on the CPU.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuReason {
    /// The page has no GPU (yet, or at all; the page's GPU status says why).
    NoGpu,
    /// The user unticked "train on the GPU".
    Chosen,
    /// The GPU is a software adapter, on which this page trains faster on the CPU.
    SoftwareAdapter,
    /// The Z2 radial flow keeps its centre fixed, which only the CPU trainer does.
    FixedCentre,
    /// The GPU kernels cannot train this flow or target (the reason).
    Unsupported(GpuError),
    /// The GPU device was lost while the run trained there.
    Lost(String),
}

impl CpuReason {
    /// The reason for the user, where one is worth showing beside the device.
    pub fn note(&self) -> Option<String> {
        match self {
            Self::NoGpu | Self::Chosen => None,
            Self::SoftwareAdapter => Some("the GPU is emulated in software, slower here".into()),
            Self::FixedCentre => Some("the Z2 radial flow's fixed centre is the CPU's".into()),
            Self::Unsupported(why) => Some(format!("the GPU cannot: {why}")),
            Self::Lost(why) => Some(format!("the GPU device was lost: {why}")),
        }
    }
}

/// Where a run is asked to train: on this GPU, or on the CPU for a reason.
pub type GpuOffer = Result<GpuContext, CpuReason>;
