//! The model view's deformed grid and samples where the run trains on the
//! device the page draws with: the flow's display kernel pushes the latent
//! grid lines and samples into vertex buffers, and an egui paint callback
//! draws them from there (`overlay.wgsl`); nothing is read back.

use crate::flow::grid::{self, Polylines};
use crate::gpu::{GpuContext, GpuError, GpuTrainer, shader};
use eframe::egui;
use eframe::egui_wgpu::wgpu;
use eframe::egui_wgpu::{self, CallbackResources, CallbackTrait, RenderState, ScreenDescriptor};
use glam::DVec2;
use std::cell::Cell;

/// Points along each grid line: dense enough to stay smooth where a flow
/// bends space hard (the CPU's picture refines its lines instead).
const LINE_POINTS: usize = 256;

/// Radii of the polar grid's circles (latent units), as the CPU draws them.
const RADII: [f64; 8] = [0.4, 0.8, 1.2, 1.6, 2.0, 2.4, 2.8, 3.2];
/// Rays of the polar grid.
const RAYS: usize = 16;
/// Lines each way of the Cartesian grid.
const CARTESIAN_LINES: usize = 13;

/// The most grid points either grid has.
fn max_grid_points() -> usize {
    let polar = RADII.len() * (LINE_POINTS + 1) + RAYS * LINE_POINTS;
    let cartesian = 2 * CARTESIAN_LINES * LINE_POINTS;
    polar.max(cartesian)
}

/// The latent grid: polar around a radial flow's centre (`geometry`: centre
/// and log-scales), else Cartesian.
pub fn latent_grid(geometry: Option<(DVec2, DVec2)>) -> Polylines {
    match geometry {
        Some((c, s)) => grid::polar(c.to_array(), s.to_array(), &RADII, RAYS, LINE_POINTS),
        None => grid::cartesian(-3.0, 3.0, CARTESIAN_LINES, LINE_POINTS),
    }
}

/// Per point, 1 where a segment to the next point is drawn (both on one line).
fn joined(lines: &Polylines) -> Vec<f32> {
    let mut flags = vec![0.0; lines.len()];
    for line in &lines.lines {
        let joined_to_next = line.start..line.end.saturating_sub(1).max(line.start);
        flags[joined_to_next].fill(1.0);
    }
    flags
}

/// The render pipelines of the overlay, made once per renderer (they
/// depend on its target format) and kept in its callback resources.
struct OverlayPipelines {
    samples: wgpu::RenderPipeline,
    lines: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    /// whether the target stores linear colour (an sRGB format)
    linear_out: bool,
}

impl OverlayPipelines {
    fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Result<Self, GpuError> {
        let source = shader::compose("overlay.wgsl", &[])?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("model view overlay"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("model view overlay"),
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::VERTEX | wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("model view overlay"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        // per instance: a pushed point (x, y, log det), or a segment's two
        // (the same buffer bound again one point on) and its flag
        let instance =
            |attributes: &'static [wgpu::VertexAttribute], stride: u64| wgpu::VertexBufferLayout {
                array_stride: stride,
                step_mode: wgpu::VertexStepMode::Instance,
                attributes,
            };
        const POINT_A: [wgpu::VertexAttribute; 1] = wgpu::vertex_attr_array![0 => Float32x3];
        const POINT_B: [wgpu::VertexAttribute; 1] = wgpu::vertex_attr_array![1 => Float32x3];
        const JOINED: [wgpu::VertexAttribute; 1] = wgpu::vertex_attr_array![2 => Float32];
        let pipeline =
            |label: &str, vs: &str, fs: &str, buffers: &[Option<wgpu::VertexBufferLayout>]| {
                device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                    label: Some(label),
                    layout: Some(&pipeline_layout),
                    vertex: wgpu::VertexState {
                        module: &module,
                        entry_point: Some(vs),
                        compilation_options: Default::default(),
                        buffers,
                    },
                    primitive: wgpu::PrimitiveState::default(),
                    depth_stencil: None,
                    multisample: wgpu::MultisampleState::default(),
                    fragment: Some(wgpu::FragmentState {
                        module: &module,
                        entry_point: Some(fs),
                        compilation_options: Default::default(),
                        targets: &[Some(wgpu::ColorTargetState {
                            format,
                            blend: Some(wgpu::BlendState::PREMULTIPLIED_ALPHA_BLENDING),
                            write_mask: wgpu::ColorWrites::ALL,
                        })],
                    }),
                    multiview_mask: None,
                    cache: None,
                })
            };
        let samples = pipeline(
            "model samples",
            "sample_vs",
            "sample_fs",
            &[Some(instance(&POINT_A, 12))],
        );
        let lines = pipeline(
            "deformed grid",
            "line_vs",
            "line_fs",
            &[
                Some(instance(&POINT_A, 12)),
                Some(instance(&POINT_B, 12)),
                Some(instance(&JOINED, 4)),
            ],
        );
        Ok(Self {
            samples,
            lines,
            layout,
            linear_out: format.is_srgb(),
        })
    }
}

/// The view's settings for `overlay.wgsl` (its `View`).
fn view_words(size_px: egui::Vec2, pixels_per_point: f32, linear_out: bool) -> [u32; 8] {
    [
        size_px.x.to_bits(),
        size_px.y.to_bits(),
        // egui's sample dots (1.3 points) and grid strokes (1 point)
        (1.3 * pixels_per_point).to_bits(),
        (0.5 * pixels_per_point).to_bits(),
        u32::from(linear_out),
        0,
        0,
        0,
    ]
}

/// The samples and the deformed grid of one run, in buffers on the device
/// the page draws with.
pub struct GpuOverlay {
    ctx: GpuContext,
    latent_samples: wgpu::Buffer,
    pushed_samples: wgpu::Buffer,
    samples: usize,
    latent_grid: wgpu::Buffer,
    pushed_grid: wgpu::Buffer,
    joined: wgpu::Buffer,
    /// the points of the grid now in `latent_grid`
    grid_points: Cell<usize>,
    /// the radial frame the latent grid was made for (`Some(None)`: Cartesian)
    geometry: Cell<Option<Option<(DVec2, DVec2)>>>,
    view: wgpu::Buffer,
    bind: wgpu::BindGroup,
    /// whether the buffers hold a picture yet
    drawn: Cell<bool>,
}

impl GpuOverlay {
    /// Buffers for `samples` samples and the grid on `ctx`, which must be
    /// the device `render` draws with.
    pub fn new(render: &RenderState, ctx: &GpuContext, samples: usize) -> Result<Self, GpuError> {
        let layout = {
            let mut renderer = render.renderer.write();
            let resources = &mut renderer.callback_resources;
            if resources.get::<OverlayPipelines>().is_none() {
                resources.insert(OverlayPipelines::new(&render.device, render.target_format)?);
            }
            match resources.get::<OverlayPipelines>() {
                Some(pipelines) => pipelines.layout.clone(),
                None => {
                    return Err(GpuError::unsupported(
                        "the overlay's pipelines went missing",
                    ));
                }
            }
        };
        let points = max_grid_points();
        let buffer = |label: &str, bytes: usize, usage: wgpu::BufferUsages| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes as u64,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let input = U::STORAGE | U::COPY_DST | U::COPY_SRC;
        let output = U::STORAGE | U::COPY_DST | U::COPY_SRC | U::VERTEX;
        let view = buffer("overlay view", 32, U::UNIFORM | U::COPY_DST);
        let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("model view overlay"),
            layout: &layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: view.as_entire_binding(),
            }],
        });
        Ok(Self {
            ctx: ctx.clone(),
            latent_samples: buffer("latent samples", 8 * samples, input),
            pushed_samples: buffer("model samples", 12 * samples, output),
            samples,
            latent_grid: buffer("latent grid", 8 * points, input),
            pushed_grid: buffer("deformed grid", 12 * points, output),
            joined: buffer("grid segments", 4 * points, U::VERTEX | U::COPY_DST),
            grid_points: Cell::new(0),
            geometry: Cell::new(None),
            view,
            bind,
            drawn: Cell::new(false),
        })
    }

    /// Records the samples (`latent`: 2 floats each, as many as the
    /// overlay holds) and the grid (polar in the radial frame `geometry`,
    /// else Cartesian) pushed through `trainer`'s flow.
    pub fn encode(
        &self,
        trainer: &mut GpuTrainer,
        encoder: &mut wgpu::CommandEncoder,
        latent: &[f32],
        geometry: Option<(DVec2, DVec2)>,
    ) -> Result<(), GpuError> {
        if latent.len() != 2 * self.samples {
            return Err(GpuError::unsupported(format!(
                "{} latent samples for an overlay of {}",
                latent.len() / 2,
                self.samples
            )));
        }
        if self.geometry.get() != Some(geometry) {
            let lines = latent_grid(geometry);
            let points: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
            let queue = &self.ctx.queue;
            queue.write_buffer(&self.latent_grid, 0, bytemuck::cast_slice(&points));
            queue.write_buffer(&self.joined, 0, bytemuck::cast_slice(&joined(&lines)));
            self.grid_points.set(lines.len());
            self.geometry.set(Some(geometry));
        }
        self.ctx
            .queue
            .write_buffer(&self.latent_samples, 0, bytemuck::cast_slice(latent));
        trainer.encode_x_from_z(
            encoder,
            &self.latent_samples,
            &self.pushed_samples,
            self.samples,
        )?;
        let grid = self.grid_points.get();
        trainer.encode_x_from_z(encoder, &self.latent_grid, &self.pushed_grid, grid)?;
        self.drawn.set(true);
        Ok(())
    }

    /// What paints the overlay over the view at `rect` (once the buffers
    /// hold a picture): the grid and the samples as `overlays` asks.
    pub fn paint_callback(
        &self,
        rect: egui::Rect,
        grid: bool,
        samples: bool,
    ) -> Option<egui::PaintCallback> {
        self.drawn.get().then(|| {
            egui_wgpu::Callback::new_paint_callback(
                rect,
                OverlayPaint {
                    size: rect.size(),
                    view: self.view.clone(),
                    bind: self.bind.clone(),
                    samples: samples.then(|| (self.pushed_samples.clone(), self.samples as u32)),
                    grid: grid.then(|| {
                        (
                            self.pushed_grid.clone(),
                            self.joined.clone(),
                            self.grid_points.get() as u32,
                        )
                    }),
                },
            )
        })
    }

    /// The pushed samples and grid points (x, y, log det each), read back
    /// for checks.
    pub async fn pushed_async(&self) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let (samples, grid) = (self.samples as u64, self.grid_points.get() as u64);
        let ctx = &self.ctx;
        let samples = ctx
            .read_back_async(&self.pushed_samples, 0, 12 * samples)
            .await?;
        let grid = ctx.read_back_async(&self.pushed_grid, 0, 12 * grid).await?;
        Ok((
            bytemuck::cast_slice(&samples).to_vec(),
            bytemuck::cast_slice(&grid).to_vec(),
        ))
    }
}

/// One frame's painting of a [`GpuOverlay`].
struct OverlayPaint {
    /// the view, in points
    size: egui::Vec2,
    view: wgpu::Buffer,
    bind: wgpu::BindGroup,
    samples: Option<(wgpu::Buffer, u32)>,
    grid: Option<(wgpu::Buffer, wgpu::Buffer, u32)>,
}

impl CallbackTrait for OverlayPaint {
    fn prepare(
        &self,
        _device: &wgpu::Device,
        queue: &wgpu::Queue,
        screen: &ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        resources: &mut CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        let linear_out = resources
            .get::<OverlayPipelines>()
            .is_some_and(|p| p.linear_out);
        let ppp = screen.pixels_per_point;
        let words = view_words(self.size * ppp, ppp, linear_out);
        queue.write_buffer(&self.view, 0, bytemuck::cast_slice(&words));
        Vec::new()
    }

    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        resources: &CallbackResources,
    ) {
        let Some(pipelines) = resources.get::<OverlayPipelines>() else {
            return;
        };
        pass.set_bind_group(0, &self.bind, &[]);
        if let Some((pushed, joined, points)) = &self.grid
            && *points > 1
        {
            pass.set_pipeline(&pipelines.lines);
            pass.set_vertex_buffer(0, pushed.slice(..));
            pass.set_vertex_buffer(1, pushed.slice(12..));
            pass.set_vertex_buffer(2, joined.slice(..));
            pass.draw(0..6, 0..points - 1);
        }
        if let Some((pushed, samples)) = &self.samples {
            pass.set_pipeline(&pipelines.samples);
            pass.set_vertex_buffer(0, pushed.slice(..));
            pass.draw(0..6, 0..*samples);
        }
    }
}
