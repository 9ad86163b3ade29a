//! The page's compute devices, shared by both pages: the GPU, looked for once
//! when the app starts (a browser answers a moment later) and again on
//! request, and the CPU threads runs train with.

use super::host::{CpuReason, GpuOffer};
use super::web::spawn;
use crate::gpu::GpuContext;
use std::cell::RefCell;
use std::rc::Rc;

/// Whether the app has a GPU to train on.
pub enum GpuStatus {
    Starting,
    Ready(GpuContext),
    Unavailable(String),
}

/// The app's GPU status (shared with the task that looks for it) and CPU threads.
#[derive(Clone)]
pub struct Devices {
    gpu: Rc<RefCell<GpuStatus>>,
    /// threads of the CPU trainer (1 in a browser)
    pub cpu_threads: usize,
}

impl Default for Devices {
    fn default() -> Self {
        Self {
            gpu: Rc::new(RefCell::new(GpuStatus::Starting)),
            cpu_threads: crate::train::default_threads(),
        }
    }
}

impl Devices {
    /// Looks for a GPU (natively at once; in a browser the answer arrives later).
    pub fn find(&self) {
        *self.gpu.borrow_mut() = GpuStatus::Starting;
        let slot = Rc::clone(&self.gpu);
        spawn(async move {
            let status = match GpuContext::new().await {
                Ok(ctx) => GpuStatus::Ready(ctx),
                Err(e) => GpuStatus::Unavailable(e.to_string()),
            };
            *slot.borrow_mut() = status;
        });
    }

    /// The GPU found, if any.
    pub fn context(&self) -> Option<GpuContext> {
        match &*self.gpu.borrow() {
            GpuStatus::Ready(ctx) => Some(ctx.clone()),
            _ => None,
        }
    }

    /// The GPU to offer a run: the one found when `wanted`, else why not (a
    /// software adapter not wanted is named as such).
    pub fn offer(&self, wanted: bool) -> GpuOffer {
        match self.context() {
            Some(ctx) if wanted => Ok(ctx),
            Some(ctx) if ctx.software => Err(CpuReason::SoftwareAdapter),
            Some(_) => Err(CpuReason::Chosen),
            None => Err(CpuReason::NoGpu),
        }
    }

    /// Whether the search is still under way.
    pub fn starting(&self) -> bool {
        matches!(*self.gpu.borrow(), GpuStatus::Starting)
    }

    /// Whether there is none (and the search is over).
    pub fn unavailable(&self) -> bool {
        matches!(*self.gpu.borrow(), GpuStatus::Unavailable(_))
    }

    /// Why there is no GPU, if there is none.
    pub fn note(&self) -> Option<String> {
        match &*self.gpu.borrow() {
            GpuStatus::Starting => Some("looking for a GPU...".into()),
            GpuStatus::Unavailable(e) => Some(format!("no GPU: {e}")),
            GpuStatus::Ready(_) => None,
        }
    }

    /// Marks the GPU as gone (its device was lost).
    pub fn lose(&self, why: String) {
        *self.gpu.borrow_mut() = GpuStatus::Unavailable(why);
    }
}
