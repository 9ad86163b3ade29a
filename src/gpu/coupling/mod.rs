//! Training coupling flows on the GPU. A coupling layer is a dense ResNet
//! conditioner feeding scalar stacks on the active coordinates; on the GPU a
//! layer is one dispatch (`coupling_layer.wgsl`: a workgroup takes a tile of
//! samples through the conditioner and the stacks), so a step is a short fixed
//! list of dispatches, recorded once and replayed: per layer forward; the loss;
//! per layer backwards the layer again with its reverse modes (only the layer
//! inputs are kept, so memory does not grow with layers x batch) and the sums
//! over the batch that make its weight gradients (no atomics); then the batch
//! sum and Adam. Every operation's settings sit in one uniform buffer, written
//! once.

mod ops;

use crate::flow::{CouplingSpec, Flow, FlowModel};
use crate::gpu::GpuError;
use crate::gpu::optimizer::{FlowKernels, GpuOptimizer};
use crate::gpu::plan::{self, Pipelines, Plan, Purpose};
use crate::gpu::specialize::{energy_id, energy_value, stack_values};
use crate::gpu::{GpuContext, shader};
use crate::target::Target;
use crate::train::TrainSettings;
use ops::{Kernel, Layout, TILE, build_plan, max_out, work_bytes};

/// The largest display chunk, in points.
const MAX_CHUNK: usize = 65_536;
/// Display chunks keep their work buffer under this many bytes.
const DISPLAY_BYTES: u64 = 64 << 20;

/// A coupling flow's training state on the GPU.
pub struct GpuCouplingTrainer {
    opt: GpuOptimizer,
    ctx: GpuContext,
    spec: CouplingSpec,
    /// the flow: its structure, with the parameters last known on the CPU
    model: FlowModel<f64>,
    pipelines: Pipelines<Kernel>,
    train: Plan<Kernel>,
    log_q_plan: Option<Plan<Kernel>>,
    push_plan: Option<Plan<Kernel>>,
}

/// The coupling flow's kernels, specialized for `spec` and the energy `energy`.
fn compile(
    ctx: &GpuContext,
    spec: &CouplingSpec,
    energy: u32,
) -> Result<Pipelines<Kernel>, GpuError> {
    let mut values = stack_values(&spec.stack)?;
    values.extend([
        energy_value(energy),
        ("D", spec.dim.to_string()),
        ("NOUT", max_out(spec).to_string()),
    ]);
    values.extend([
        ("W", spec.width.to_string()),
        ("DEPTH", spec.depth.to_string()),
        ("TILE", TILE.to_string()),
    ]);
    let layer = shader::compose("coupling_layer.wgsl", &values)?;
    let sum = shader::compose("batch_sum.wgsl", &[])?;
    Ok(Pipelines::new(
        ctx,
        &[
            (
                Kernel::LayerForward,
                "coupling layer forward",
                &layer,
                "layer_forward_main",
            ),
            (
                Kernel::LayerBackward,
                "coupling layer backward",
                &layer,
                "layer_backward_main",
            ),
            (
                Kernel::WeightGrad,
                "coupling weight gradients",
                &layer,
                "weight_grad_main",
            ),
            (Kernel::Loss, "coupling loss", &layer, "loss_main"),
            (Kernel::Sum, "coupling sum", &sum, "sum_main"),
        ],
    ))
}

impl GpuCouplingTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, GpuError> {
        let FlowModel::Coupling(flow) = &model else {
            return Err(GpuError::unsupported(
                "the GPU coupling trainer takes a coupling flow",
            ));
        };
        let spec = flow.spec.clone();
        let energy = energy_id(settings.loss, &target)?;
        if energy != 0 && spec.dim != 2 {
            return Err(GpuError::unsupported("the GPU energies are 2D"));
        }
        if spec.dim != target.dim() {
            return Err(GpuError::unsupported(format!(
                "the flow is {}D but target '{}' is {}D",
                spec.dim,
                target.name(),
                target.dim()
            )));
        }
        plan::check_fits(
            &ctx,
            settings.batch,
            work_bytes(&spec, settings.batch, Purpose::Train(settings.loss)),
        )?;
        if settings.batch > MAX_CHUNK * 16 {
            // (the work buffer's offsets are 32-bit words)
            return Err(GpuError::unsupported(format!(
                "batch {} is more than the GPU kernels address ({}); use a smaller batch",
                settings.batch,
                MAX_CHUNK * 16
            )));
        }
        let pipelines = compile(&ctx, &spec, energy)?;
        let batch = settings.batch;
        let loss = settings.loss;
        let opt = GpuOptimizer::new(&ctx, flow.params(), spec.dim, target, settings)?;
        let train = build_plan(
            &ctx,
            &pipelines,
            &spec,
            batch,
            Purpose::Train(loss),
            [&opt.params, &opt.total],
        );
        Ok(Self {
            opt,
            ctx,
            spec: flow.spec.clone(),
            model: model.clone(),
            pipelines,
            train,
            log_q_plan: None,
            push_plan: None,
        })
    }

    /// Dispatches per training step: the recorded operations plus Adam.
    pub fn dispatches_per_step(&self) -> usize {
        self.train.dispatches() + 1
    }

    /// `log q(x)` at every point (n x d) with the current parameters, in chunks.
    pub async fn log_q_async(&mut self, points: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.display(Purpose::LogQ, points, 1).await
    }

    /// Latent points (n x d) pushed through `x_from_z`: per point the data-space
    /// point and `log |det dx/dz|` (n x (d + 1)), in chunks.
    pub async fn x_from_z_async(&mut self, latent: &[f32]) -> Result<Vec<f32>, GpuError> {
        let d = self.spec.dim;
        self.display(Purpose::Push, latent, d + 1).await
    }

    /// Records `log q(x)` of `n` points (`points`: n x d float32) into `log_q`
    /// (n float32). Both buffers stay on the GPU (`points` needs `COPY_SRC`,
    /// `log_q` `COPY_DST`), so the app can draw from them without a read-back.
    pub fn encode_log_q(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        points: &wgpu::Buffer,
        log_q: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        self.encode_display(Purpose::LogQ, encoder, points, log_q, n)
    }

    /// Records `n` latent points (`latent`: n x d float32) pushed through
    /// `x_from_z` into `pushed`: per point the data-space point and
    /// `log |det dx/dz|` (n x (d + 1) float32). Both buffers stay on the GPU
    /// (`latent` needs `COPY_SRC`, `pushed` `COPY_DST`).
    pub fn encode_x_from_z(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        latent: &wgpu::Buffer,
        pushed: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        self.encode_display(Purpose::Push, encoder, latent, pushed, n)
    }

    /// Records a display plan over `n` input points in chunks: each chunk is
    /// copied into the plan's work buffer, run, and its outputs copied out.
    fn encode_display(
        &mut self,
        purpose: Purpose,
        encoder: &mut wgpu::CommandEncoder,
        input: &wgpu::Buffer,
        output: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), GpuError> {
        let spec = self.spec.clone();
        let d = spec.dim;
        let width = if purpose == Purpose::LogQ { 1 } else { d + 1 };
        if input.size() < (n * d * 4) as u64 || output.size() < (n * width * 4) as u64 {
            return Err(GpuError::unsupported(format!(
                "the display buffers are too small for {n} points"
            )));
        }
        // the largest power-of-two chunk whose work buffer fits, no larger than needed
        let mut chunk = MAX_CHUNK.min(n.max(64).next_power_of_two());
        while chunk > 64 && work_bytes(&spec, chunk, purpose) > DISPLAY_BYTES {
            chunk /= 2;
        }
        let slot = match purpose {
            Purpose::LogQ => &mut self.log_q_plan,
            _ => &mut self.push_plan,
        };
        if slot
            .as_ref()
            .is_none_or(|p| p.n != chunk || p.purpose != purpose)
        {
            *slot = Some(build_plan(
                &self.ctx,
                &self.pipelines,
                &spec,
                chunk,
                purpose,
                [&self.opt.params, &self.opt.total],
            ));
        }
        let Some(plan) = slot.as_ref() else {
            unreachable!("built above")
        };
        let mut start = 0;
        while start < n {
            let m = chunk.min(n - start);
            // the rest of a short last chunk keeps earlier points: computed, unused
            encoder.copy_buffer_to_buffer(
                input,
                (start * d * 4) as u64,
                &plan.work,
                0,
                (m * d * 4) as u64,
            );
            plan.encode(&self.pipelines, encoder);
            encoder.copy_buffer_to_buffer(
                &plan.work,
                Layout::new(&spec, max_out(&spec), chunk, purpose).out as u64 * 4,
                output,
                (start * width * 4) as u64,
                (m * width * 4) as u64,
            );
            start += m;
        }
        Ok(())
    }

    /// Runs a display plan over `points` and reads the outputs back.
    async fn display(
        &mut self,
        purpose: Purpose,
        points: &[f32],
        width: usize,
    ) -> Result<Vec<f32>, GpuError> {
        let d = self.spec.dim;
        let n = points.len() / d;
        if n == 0 {
            return Ok(Vec::new());
        }
        let input = self
            .ctx
            .storage("display input", bytemuck::cast_slice(points), true);
        let output = self
            .ctx
            .storage("display output", &vec![0u8; n * width * 4], true);
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        self.encode_display(purpose, &mut encoder, &input, &output, n)?;
        self.ctx.queue.submit([encoder.finish()]);
        let bytes = self.ctx.read_back_async(&output, 0, output.size()).await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&bytes).to_vec())
    }
}

impl FlowKernels for GpuCouplingTrainer {
    fn optimizer(&self) -> &GpuOptimizer {
        &self.opt
    }

    fn optimizer_mut(&mut self) -> &mut GpuOptimizer {
        &mut self.opt
    }

    fn encode_gradient(&self, batch: &[f32], encoder: &mut wgpu::CommandEncoder) {
        self.train.upload(&self.ctx, batch);
        self.train.encode(&self.pipelines, encoder);
    }

    fn held(&self) -> &FlowModel<f64> {
        &self.model
    }

    fn held_mut(&mut self) -> &mut FlowModel<f64> {
        &mut self.model
    }
}
