//! The model view's heat map drawn on the GPU: log q at every texel of an
//! n x n texture (the trainer's own display kernel), its peak and the colour
//! map, all on the device. Nothing crosses to the CPU: the app registers the
//! texture with egui's renderer, which draws it where it lies.

use crate::gpu::{GpuContext, GpuError, GpuTrainer, shader};

/// The heat map of one view size: its texels' points, their log q, the peak
/// and the coloured texture.
pub struct Heatmap {
    ctx: GpuContext,
    n: usize,
    points: wgpu::Buffer,
    log_q: wgpu::Buffer,
    peak: wgpu::Buffer,
    settings: wgpu::Buffer,
    peak_pipeline: wgpu::ComputePipeline,
    colour_pipeline: wgpu::ComputePipeline,
    peak_bind: wgpu::BindGroup,
    colour_bind: wgpu::BindGroup,
    texture: wgpu::Texture,
}

/// `heatmap.wgsl`'s settings: texels a side, and the scale (1: linear).
fn settings_words(n: usize, linear: bool) -> [u32; 4] {
    [n as u32, u32::from(linear), 0, 0]
}

impl Heatmap {
    /// A heat map of `n` x `n` texels centred on `points` (data space,
    /// `n * n` pairs, row by row from the view's top), coloured by log q
    /// over the 12 nats below its peak, or by q / max q where `linear`.
    pub fn new(ctx: &GpuContext, n: usize, points: &[f32], linear: bool) -> Result<Self, GpuError> {
        let largest = ctx.device.limits().max_texture_dimension_2d as usize;
        if n == 0 || n > largest || points.len() != 2 * n * n {
            return Err(GpuError::unsupported(format!(
                "a heat map of {n} x {n} texels (this GPU draws at most {largest} a side) needs {} points, not {}",
                n * n,
                points.len() / 2
            )));
        }
        let source = shader::compose("heatmap.wgsl", &[])?;
        let peak_pipeline = ctx.pipeline_at("heat map peak", &source, "peak_main");
        let colour_pipeline = ctx.pipeline_at("heat map colour", &source, "colour_main");
        let points = ctx.storage("heat map points", bytemuck::cast_slice(points), true);
        let log_q = ctx.storage("heat map log q", &vec![0; 4 * n * n], true);
        let peak = ctx.storage("heat map peak", &[0; 4], true);
        let settings = ctx.uniform(
            "heat map settings",
            bytemuck::cast_slice(&settings_words(n, linear)),
        );
        let texture = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("model density"),
            size: wgpu::Extent3d {
                width: n as u32,
                height: n as u32,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage: wgpu::TextureUsages::STORAGE_BINDING
                | wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        let peak_bind = ctx.bind(&peak_pipeline, &[&settings, &log_q, &peak]);
        let colour_bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("heat map colour"),
            layout: &colour_pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: settings.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: log_q.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: peak.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: wgpu::BindingResource::TextureView(&view),
                },
            ],
        });
        Ok(Self {
            ctx: ctx.clone(),
            n,
            points,
            log_q,
            peak,
            settings,
            peak_pipeline,
            colour_pipeline,
            peak_bind,
            colour_bind,
            texture,
        })
    }

    /// Texels a side.
    pub fn side(&self) -> usize {
        self.n
    }

    /// The coloured texture (`Rgba8Unorm`, sRGB-encoded bytes, as egui's
    /// own textures hold them).
    pub fn texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// The device the heat map lives on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Colours by q / max q (`true`) or by log q from now on (the next
    /// colouring shows it).
    pub fn set_linear(&self, linear: bool) {
        self.ctx.queue.write_buffer(
            &self.settings,
            0,
            bytemuck::cast_slice(&settings_words(self.n, linear)),
        );
    }

    /// Records log q of `trainer`'s flow at every texel, then the colouring.
    /// The trainer must run on the heat map's device.
    pub fn encode(
        &self,
        trainer: &mut GpuTrainer,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<(), GpuError> {
        if !trainer.context().same_device(&self.ctx) {
            return Err(GpuError::unsupported(
                "the heat map lives on another GPU device than the trainer",
            ));
        }
        trainer.encode_log_q(encoder, &self.points, &self.log_q, self.n * self.n)?;
        self.encode_colour(encoder);
        Ok(())
    }

    /// Records the colouring of the log q in place: its peak, then each texel.
    pub fn encode_colour(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("heat map"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&self.peak_pipeline);
        pass.set_bind_group(0, &self.peak_bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
        pass.set_pipeline(&self.colour_pipeline);
        pass.set_bind_group(0, &self.colour_bind, &[]);
        let groups = self.n.div_ceil(8) as u32;
        pass.dispatch_workgroups(groups, groups, 1);
    }

    /// Records and submits [`Self::encode`].
    pub fn draw(&self, trainer: &mut GpuTrainer) -> Result<(), GpuError> {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        self.encode(trainer, &mut encoder)?;
        self.ctx.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// Colours the log q in place again (after [`Self::set_linear`]).
    pub fn recolour(&self) {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        self.encode_colour(&mut encoder);
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// The texture's bytes, RGBA row by row from the top: a copy back to
    /// the CPU (to save or to check it, never to draw it).
    pub async fn pixels_async(&self) -> Result<Vec<u8>, GpuError> {
        let row = 4 * self.n;
        // copies from a texture go in rows of whole 256-byte blocks
        let padded = row.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as usize);
        let buffer = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("heat map pixels"),
            size: (padded * self.n) as u64,
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        encoder.copy_texture_to_buffer(
            self.texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded as u32),
                    rows_per_image: None,
                },
            },
            self.texture.size(),
        );
        self.ctx.queue.submit([encoder.finish()]);
        let bytes = self.ctx.read_back_async(&buffer, 0, buffer.size()).await?;
        Ok(bytes
            .chunks(padded)
            .flat_map(|r| r[..row].iter().copied())
            .collect())
    }

    /// [`Self::pixels_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn pixels(&self) -> Result<Vec<u8>, GpuError> {
        pollster::block_on(self.pixels_async())
    }

    /// The largest finite log q of the last colouring (4 bytes back to the
    /// CPU: the colour bar's numbers).
    pub async fn peak_async(&self) -> Result<f32, GpuError> {
        let bytes = self.ctx.read_back_async(&self.peak, 0, 4).await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&bytes)[0])
    }

    /// The log q at every texel (a copy back to the CPU, for checks).
    pub async fn log_q_async(&self) -> Result<Vec<f32>, GpuError> {
        let bytes = self
            .ctx
            .read_back_async(&self.log_q, 0, self.log_q.size())
            .await?;
        Ok(bytemuck::cast_slice(&bytes).to_vec())
    }
}
