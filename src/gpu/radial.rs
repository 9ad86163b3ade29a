//! Training radial flows on the GPU: per step, one dispatch computes every
//! sample's loss term and gradient (`radial_flow.wgsl`: forward KL in the density
//! direction, or reverse KL against a 2D energy in the sampling direction), one
//! sums them over the batch (`column_sum.wgsl`) and one applies Adam
//! (`adam.wgsl`). Parameters and the optimizer's moments stay on the GPU between
//! steps; the batch is drawn on the CPU, as the CPU trainer draws it, and
//! uploaded (a few kilobytes). The same kernels give log q on grids and push
//! latent points through `x_from_z` for display.

use super::optimizer::{FlowKernels, GpuOptimizer};
use super::specialize::{energy_id, energy_value, stack_values};
use super::{GpuContext, shader};
use crate::flow::{Flow, FlowModel, RadialConditioner, RadialFlow, RadialSpec};
use crate::gpu::GpuError;
use crate::target::Target;
use crate::train::TrainSettings;

const WORKGROUP: u32 = 64;

/// The structure constants the kernel is specialized for.
fn kernel_source(flow: &RadialFlow<f64>, energy: u32) -> Result<String, GpuError> {
    let spec = &flow.spec;
    let order = match spec.conditioner {
        RadialConditioner::Direct => 0,
        RadialConditioner::Fourier { order } => order,
    };
    if spec.dim > 16 {
        return Err(GpuError::unsupported(
            "the GPU radial kernel takes up to 16 dimensions",
        ));
    }
    let mut values = stack_values(&spec.stack)?;
    values.extend([
        energy_value(energy),
        ("D", spec.dim.to_string()),
        ("ORDER", order.to_string()),
        ("NPARAMS", spec.n_params().to_string()),
    ]);
    shader::compose("radial_flow.wgsl", &values).map_err(GpuError::from)
}

/// Workgroups for `n` points, one thread each (WebGPU allows 65,535 per dimension).
fn dispatch_size(n: usize) -> Result<u32, GpuError> {
    let groups = n.div_ceil(WORKGROUP as usize);
    if groups > 65_535 {
        return Err(GpuError::unsupported(format!(
            "{n} points in one dispatch; the limit is {}",
            65_535 * WORKGROUP as usize
        )));
    }
    Ok(groups as u32)
}

/// A radial flow's training state on the GPU.
pub struct GpuRadialTrainer {
    opt: GpuOptimizer,
    ctx: GpuContext,
    spec: RadialSpec,
    /// the flow: its structure, with the parameters last known on the CPU
    model: FlowModel<f64>,
    /// density direction: forward-KL gradients, and log q for grids
    grad: wgpu::ComputePipeline,
    /// sampling direction with reverse mode: reverse-KL gradients
    reverse: Option<wgpu::ComputePipeline>,
    push: wgpu::ComputePipeline,
    reduce: wgpu::ComputePipeline,
    points: wgpu::Buffer,
    per_sample: wgpu::Buffer,
    /// unused by training: the density output binding needs a buffer
    no_log_q: wgpu::Buffer,
    batch_settings: wgpu::Buffer,
    sizes: wgpu::Buffer,
}

impl GpuRadialTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, GpuError> {
        let FlowModel::Radial(flow) = &model else {
            return Err(GpuError::unsupported(
                "the GPU backend trains radial flows so far; use --backend cpu for this flow",
            ));
        };
        let energy = energy_id(settings.loss, &target)?;
        if energy != 0 && flow.dim() != 2 {
            return Err(GpuError::unsupported("the GPU energies are 2D"));
        }
        if flow.dim() != target.dim() {
            return Err(GpuError::unsupported(format!(
                "the flow is {}D but target '{}' is {}D",
                flow.dim(),
                target.name(),
                target.dim()
            )));
        }
        // Every sample writes its own gradient row: check the device holds them.
        let per_sample_bytes = (settings.batch as u64) * (flow.n_params() as u64 + 1) * 4;
        let limits = ctx.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if per_sample_bytes > max {
            return Err(GpuError::unsupported(format!(
                "batch {} needs {} MB of per-sample gradients on the GPU, more than this device allows ({} MB); use a smaller batch",
                settings.batch,
                per_sample_bytes >> 20,
                max >> 20
            )));
        }
        let source = kernel_source(flow, energy)?;
        let reverse =
            (energy != 0).then(|| ctx.pipeline_at("radial reverse", &source, "grad_reverse_main"));
        let grad = ctx.pipeline_at("radial grad", &source, "grad_main");
        let push = ctx.pipeline_at("radial push", &source, "push_main");
        let column_sum = shader::compose("column_sum.wgsl", &[])?;
        let reduce = ctx.pipeline_at("reduce", &column_sum, "reduce_main");
        let n_params = flow.n_params();
        let d = flow.dim();
        let b = settings.batch;
        let opt = GpuOptimizer::new(&ctx, flow.params(), d, target, settings)?;
        let points = ctx.storage("points", &vec![0u8; b * d * 4], false);
        let per_sample = ctx.storage("per sample", &vec![0u8; b * (n_params + 1) * 4], true);
        let no_log_q = ctx.storage("log q (unused)", &[0u8; 4], true);
        let batch_settings = ctx.uniform(
            "batch",
            bytemuck::cast_slice(&[b as u32, (1.0 / b as f32).to_bits(), 0, 0]),
        );
        let sizes = ctx.uniform(
            "sizes",
            bytemuck::cast_slice(&[b as u32, n_params as u32 + 1, 0, 0]),
        );
        Ok(Self {
            opt,
            ctx,
            spec: flow.spec.clone(),
            model: model.clone(),
            grad,
            reverse,
            push,
            reduce,
            points,
            per_sample,
            no_log_q,
            batch_settings,
            sizes,
        })
    }

    /// Records the loss-and-gradient passes for the uploaded batch.
    fn encode_batch_gradient(&self, encoder: &mut wgpu::CommandEncoder) {
        let n_params = self.spec.n_params() as u32;
        let (pipeline, bind_grad) = match &self.reverse {
            Some(reverse) => (
                reverse,
                self.ctx.bind(
                    reverse,
                    &[
                        &self.batch_settings,
                        &self.opt.params,
                        &self.points,
                        &self.per_sample,
                    ],
                ),
            ),
            None => (
                &self.grad,
                self.ctx.bind(
                    &self.grad,
                    &[
                        &self.batch_settings,
                        &self.opt.params,
                        &self.points,
                        &self.per_sample,
                        &self.no_log_q,
                    ],
                ),
            ),
        };
        let bind_reduce = self.ctx.bind(
            &self.reduce,
            &[&self.sizes, &self.per_sample, &self.opt.total],
        );
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_grad, &[]);
        pass.dispatch_workgroups((self.opt.settings.batch as u32).div_ceil(WORKGROUP), 1, 1);
        pass.set_pipeline(&self.reduce);
        pass.set_bind_group(0, &bind_reduce, &[]);
        pass.dispatch_workgroups((n_params + 1).div_ceil(WORKGROUP), 1, 1);
    }

    /// Records `log q(x)` of `n` points (`points`: n x d float32) into `log_q`
    /// (n float32): the density heatmap's kernel. Both buffers stay on the GPU
    /// (`STORAGE` usage), so the app can draw from them without a read-back.
    pub fn encode_log_q(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        points: &wgpu::Buffer,
        log_q: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        let groups = dispatch_size(n)?;
        let settings = self.ctx.uniform(
            "density",
            bytemuck::cast_slice(&[n as u32, 0f32.to_bits(), 1, 0]),
        );
        let bind = self.ctx.bind(
            &self.grad,
            &[&settings, &self.opt.params, points, &self.no_log_q, log_q],
        );
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.grad);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
        Ok(())
    }

    /// Records `n` latent points (`latent`: n x d float32) pushed through
    /// `x_from_z` into `pushed`: per point the data-space point and
    /// `log |det dx/dz|` (n x (d + 1) float32): samples, and the deformed grid's
    /// polylines with their shading. Both buffers stay on the GPU.
    pub fn encode_x_from_z(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        latent: &wgpu::Buffer,
        pushed: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        let groups = dispatch_size(n)?;
        let settings = self.ctx.uniform(
            "push",
            bytemuck::cast_slice(&[n as u32, 0f32.to_bits(), 0, 0]),
        );
        let bind = self.ctx.bind_at(
            &self.push,
            &[
                (0, &settings),
                (1, &self.opt.params),
                (2, latent),
                (5, pushed),
            ],
        );
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.push);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
        Ok(())
    }

    /// `log q(x)` at every point (n x d), read back (in chunks of 65,536 points).
    pub async fn log_q_async(&self, points: &[f32]) -> Result<Vec<f32>, GpuError> {
        let d = self.spec.dim;
        let mut out = Vec::with_capacity(points.len() / d);
        for chunk in points.chunks(65_536 * d) {
            let n = chunk.len() / d;
            let input = self
                .ctx
                .storage("grid points", bytemuck::cast_slice(chunk), false);
            let log_q = self.ctx.storage("log q", &vec![0u8; n * 4], true);
            let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
            self.encode_log_q(&mut encoder, &input, &log_q, n)?;
            self.ctx.queue.submit([encoder.finish()]);
            let bytes = self.ctx.read_back_async(&log_q, 0, log_q.size()).await?;
            out.extend_from_slice(bytemuck::cast_slice::<u8, f32>(&bytes));
        }
        Ok(out)
    }

    /// Latent points (n x d) pushed through `x_from_z`, read back: per point the
    /// data-space point and `log |det dx/dz|` (n x (d + 1)).
    pub async fn x_from_z_async(&self, latent: &[f32]) -> Result<Vec<f32>, GpuError> {
        let d = self.spec.dim;
        let mut out = Vec::with_capacity(latent.len() / d * (d + 1));
        for chunk in latent.chunks(65_536 * d) {
            let n = chunk.len() / d;
            let input = self
                .ctx
                .storage("latent points", bytemuck::cast_slice(chunk), false);
            let pushed = self
                .ctx
                .storage("pushed", &vec![0u8; n * (d + 1) * 4], true);
            let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
            self.encode_x_from_z(&mut encoder, &input, &pushed, n)?;
            self.ctx.queue.submit([encoder.finish()]);
            let bytes = self.ctx.read_back_async(&pushed, 0, pushed.size()).await?;
            out.extend_from_slice(bytemuck::cast_slice::<u8, f32>(&bytes));
        }
        Ok(out)
    }
}

impl FlowKernels for GpuRadialTrainer {
    fn optimizer(&self) -> &GpuOptimizer {
        &self.opt
    }

    fn optimizer_mut(&mut self) -> &mut GpuOptimizer {
        &mut self.opt
    }

    fn encode_gradient(&self, batch: &[f32], encoder: &mut wgpu::CommandEncoder) {
        self.ctx
            .queue
            .write_buffer(&self.points, 0, bytemuck::cast_slice(batch));
        self.encode_batch_gradient(encoder);
    }

    fn held(&self) -> &FlowModel<f64> {
        &self.model
    }

    fn held_mut(&mut self) -> &mut FlowModel<f64> {
        &mut self.model
    }
}
