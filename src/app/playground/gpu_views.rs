//! The model view where the run trains on the device the page draws with:
//! [`Heatmap`] computes and colours the density there at the view's pixel
//! resolution, and egui's renderer draws its texture as it lies; the
//! [`GpuOverlay`] pushes the deformed grid and the samples into vertex buffers
//! and paints them from there. Nothing is copied through the CPU.

use crate::app::widgets::colour::Scale;
use crate::gpu::heatmap::Heatmap;
use crate::gpu::{GpuContext, GpuError, GpuTrainer};
use eframe::egui;
use eframe::egui_wgpu::wgpu;
use eframe::egui_wgpu::{RenderState, Renderer};
use std::cell::Cell;
use std::sync::Arc;

use super::gpu_overlay::GpuOverlay;
use super::picture::{SAMPLES, grid_points};
use glam::DVec2;

/// The fewest texels a side: a view is never drawn coarser.
const MIN_TEXELS: usize = 512;
/// The most texels a side (a 4k screen's view, and then some).
const MAX_TEXELS: usize = 2048;

/// Texels a side for a view of `pixels` physical pixels a side: at least
/// [`MIN_TEXELS`], else the pixels rounded up to a multiple of 128 (so small
/// resizes keep the texture), at most what the device draws.
pub fn texels_for(pixels: f32, device_max: usize) -> usize {
    let wanted = (pixels.max(0.0).ceil() as usize).next_multiple_of(128);
    wanted.clamp(MIN_TEXELS, MAX_TEXELS.min(device_max).max(MIN_TEXELS))
}

/// A [`Heatmap`] registered with egui's renderer, and the overlay drawn
/// over it.
pub struct GpuViews {
    heatmap: Heatmap,
    overlay: GpuOverlay,
    texture_id: egui::TextureId,
    renderer: Arc<egui::mutex::RwLock<Renderer>>,
    scale: Cell<Scale>,
    /// whether the texture holds a picture yet
    drawn: Cell<bool>,
}

impl GpuViews {
    /// A heat map of `n` texels a side on `ctx`, which must be the device
    /// `render` draws with, coloured on `scale`, and its overlay.
    pub fn new(
        render: &RenderState,
        ctx: &GpuContext,
        n: usize,
        scale: Scale,
    ) -> Result<Self, GpuError> {
        let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
        let heatmap = Heatmap::new(ctx, n, &points, scale == Scale::Linear)?;
        let overlay = GpuOverlay::new(render, ctx, SAMPLES)?;
        let view = heatmap.texture().create_view(&Default::default());
        let texture_id = render.renderer.write().register_native_texture(
            &render.device,
            &view,
            wgpu::FilterMode::Linear,
        );
        Ok(Self {
            heatmap,
            overlay,
            texture_id,
            renderer: Arc::clone(&render.renderer),
            scale: Cell::new(scale),
            drawn: Cell::new(false),
        })
    }

    /// Whether the device is emulated in software: there the density (a
    /// flow evaluation per texel, hundreds of thousands of them) is redrawn
    /// only now and then while training, so that frames and steps keep
    /// their pace.
    pub fn software(&self) -> bool {
        self.heatmap.context().software
    }

    /// Texels a side.
    pub fn side(&self) -> usize {
        self.heatmap.side()
    }

    /// The texture to draw, once it holds a picture.
    pub fn texture_id(&self) -> Option<egui::TextureId> {
        self.drawn.get().then_some(self.texture_id)
    }

    /// Colours on `scale` from now on, recolouring the picture in place.
    pub fn set_scale(&self, scale: Scale) {
        if self.scale.replace(scale) != scale {
            self.heatmap.set_linear(scale == Scale::Linear);
            self.heatmap.recolour();
        }
    }

    /// Computes and colours the density of `trainer`'s flow (where
    /// `density`) and pushes the samples (`latent`) and the grid (in the
    /// radial frame `geometry`, else Cartesian) through it: submitted,
    /// nothing read back.
    pub fn draw(
        &self,
        trainer: &mut GpuTrainer,
        latent: &[f32],
        geometry: Option<(DVec2, DVec2)>,
        density: bool,
    ) -> Result<(), GpuError> {
        let device = &self.heatmap.context().device;
        let mut encoder = device.create_command_encoder(&Default::default());
        if density || !self.drawn.get() {
            self.heatmap.encode(trainer, &mut encoder)?;
        }
        self.overlay
            .encode(trainer, &mut encoder, latent, geometry)?;
        self.heatmap.context().queue.submit([encoder.finish()]);
        self.drawn.set(true);
        Ok(())
    }

    /// What paints the grid and the samples over the view at `rect`, once
    /// drawn.
    pub fn overlay_callback(
        &self,
        rect: egui::Rect,
        grid: bool,
        samples: bool,
    ) -> Option<egui::PaintCallback> {
        self.overlay.paint_callback(rect, grid, samples)
    }

    /// The overlay's buffers (their contents, for checks).
    pub fn overlay(&self) -> &GpuOverlay {
        &self.overlay
    }

    /// The largest log q of the picture (4 bytes back: the colour bar's
    /// numbers, read with the metrics, not every frame).
    pub async fn peak_async(&self) -> Result<f32, GpuError> {
        self.heatmap.peak_async().await
    }

    /// The heat map itself (its pixels, for checks).
    pub fn heatmap(&self) -> &Heatmap {
        &self.heatmap
    }
}

impl Drop for GpuViews {
    fn drop(&mut self) {
        self.renderer.write().free_texture(&self.texture_id);
    }
}
