//! The page's GPU, shared by both pages: looked for once when the app starts
//! (a browser answers a moment later), and looked for again on request.

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

/// The app's GPU status, shared with the task that looks for it.
#[derive(Clone)]
pub struct SharedGpu(Rc<RefCell<GpuStatus>>);

impl Default for SharedGpu {
    fn default() -> Self {
        Self(Rc::new(RefCell::new(GpuStatus::Starting)))
    }
}

impl SharedGpu {
    /// Looks for a GPU (natively at once; in a browser the answer arrives later).
    pub fn find(&self) {
        *self.0.borrow_mut() = GpuStatus::Starting;
        let slot = Rc::clone(&self.0);
        spawn(async move {
            let status = match GpuContext::new().await {
                Ok(ctx) => GpuStatus::Ready(ctx),
                Err(e) => GpuStatus::Unavailable(e),
            };
            *slot.borrow_mut() = status;
        });
    }

    /// The GPU found, if any.
    pub fn context(&self) -> Option<GpuContext> {
        match &*self.0.borrow() {
            GpuStatus::Ready(ctx) => Some(ctx.clone()),
            _ => None,
        }
    }

    /// The GPU to offer a run: the one found when `wanted`, else why not.
    pub fn offer(&self, wanted: bool) -> GpuOffer {
        match self.context() {
            Some(_) if !wanted => Err(CpuReason::Chosen),
            Some(ctx) => Ok(ctx),
            None => Err(CpuReason::NoGpu),
        }
    }

    /// Whether the search is still under way.
    pub fn starting(&self) -> bool {
        matches!(*self.0.borrow(), GpuStatus::Starting)
    }

    /// Whether there is none (and the search is over).
    pub fn unavailable(&self) -> bool {
        matches!(*self.0.borrow(), GpuStatus::Unavailable(_))
    }

    /// Why there is no GPU, if there is none.
    pub fn note(&self) -> Option<String> {
        match &*self.0.borrow() {
            GpuStatus::Starting => Some("looking for a GPU...".into()),
            GpuStatus::Unavailable(e) => Some(format!("no GPU: {e}")),
            GpuStatus::Ready(_) => None,
        }
    }

    /// Marks the GPU as gone (its device was lost).
    pub fn lose(&self, why: String) {
        *self.0.borrow_mut() = GpuStatus::Unavailable(why);
    }
}
