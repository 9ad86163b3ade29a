//! The page's compute devices, shared by both pages: the GPU, which is the
//! device the app renders with where that one runs compute shaders (else one
//! looked for when the app starts, a browser answering a moment later, and
//! again on request), and the CPU threads runs train with.

use super::host::{CpuReason, GpuOffer};
use super::web::spawn;
use crate::gpu::GpuContext;
use crate::gpu::context::compute_limits;
use eframe::egui_wgpu::{RenderState, WgpuConfiguration, WgpuSetup};
use eframe::wgpu;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// eframe's wgpu settings with a device the training kernels can use too:
/// egui's own limits (a 8192-pixel texture for 4k screens), with the storage
/// buffer sizes the adapter allows (large batches need them). A WebGL
/// fallback keeps egui's WebGL limits: it runs no compute shaders.
pub fn wgpu_options() -> WgpuConfiguration {
    let mut options = WgpuConfiguration::default();
    if let WgpuSetup::CreateNew(create) = &mut options.wgpu_setup {
        create.device_descriptor = Arc::new(|adapter| {
            let limits = if adapter.get_info().backend == wgpu::Backend::Gl {
                wgpu::Limits {
                    max_texture_dimension_2d: 8192,
                    ..wgpu::Limits::downlevel_webgl2_defaults()
                }
            } else {
                let base = wgpu::Limits {
                    max_texture_dimension_2d: 8192,
                    ..wgpu::Limits::default()
                };
                compute_limits(&adapter.limits(), base)
            };
            wgpu::DeviceDescriptor {
                label: Some("flowplay: views and training"),
                required_limits: limits,
                ..Default::default()
            }
        });
    }
    options
}

/// The GPU context of the device eframe renders with, when it can train:
/// not WebGL's (no compute shaders), and with at least the limits the kernels
/// ask of a device of their own (larger batches check their buffers' sizes
/// against the device's when they start).
pub fn render_compute_context(render: &RenderState) -> Option<GpuContext> {
    let info = render.adapter.get_info();
    let needed = wgpu::Limits::downlevel_defaults();
    let computes = info.backend != wgpu::Backend::Gl
        && render
            .adapter
            .get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS);
    let fits = needed.check_limits(&render.device.limits());
    (computes && fits)
        .then(|| GpuContext::from_device(&info, render.device.clone(), render.queue.clone()))
}

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
    /// eframe's renderer, while the GPU is the device it renders with
    render: Rc<RefCell<Option<RenderState>>>,
    /// threads of the CPU trainer (1 in a browser)
    pub cpu_threads: usize,
}

impl Default for Devices {
    fn default() -> Self {
        Self {
            gpu: Rc::new(RefCell::new(GpuStatus::Starting)),
            render: Rc::default(),
            cpu_threads: crate::train::default_threads(),
        }
    }
}

impl Devices {
    /// Looks for a GPU (natively at once; in a browser the answer arrives later).
    pub fn find(&self) {
        *self.gpu.borrow_mut() = GpuStatus::Starting;
        *self.render.borrow_mut() = None;
        let slot = Rc::clone(&self.gpu);
        spawn(async move {
            let status = match GpuContext::new().await {
                Ok(ctx) => GpuStatus::Ready(ctx),
                Err(e) => GpuStatus::Unavailable(e.to_string()),
            };
            *slot.borrow_mut() = status;
        });
    }

    /// Trains on the device the app renders with where it can (so what the
    /// kernels write can be drawn where it lies); otherwise looks for one.
    pub fn use_render_device(&self, render: Option<&RenderState>) {
        match render.zip(render.and_then(render_compute_context)) {
            Some((render, ctx)) => {
                *self.gpu.borrow_mut() = GpuStatus::Ready(ctx);
                *self.render.borrow_mut() = Some(render.clone());
            }
            None => self.find(),
        }
    }

    /// eframe's renderer, when `ctx` is the device it renders with: what
    /// the kernels write there can be drawn without leaving the GPU.
    pub fn render_for(&self, ctx: &GpuContext) -> Option<RenderState> {
        let shared = self.context().is_some_and(|own| own.same_device(ctx));
        shared.then(|| self.render.borrow().clone()).flatten()
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
        *self.render.borrow_mut() = None;
    }
}
