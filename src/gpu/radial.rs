//! Training radial flows on the GPU: per step, one dispatch computes every
//! sample's loss term and gradient (`radial.wgsl`: forward KL in the density
//! direction, or reverse KL against a 2D energy in the sampling direction), one
//! sums them over the batch (`optimizer.wgsl`) and one applies Adam
//! (`adam.wgsl`). Parameters and the optimizer's moments stay on the GPU between
//! steps; the batch is drawn on the CPU, as the CPU trainer draws it, and
//! uploaded (a few kilobytes). The same kernels give log q on grids and push
//! latent points through `x_from_z` for display.

use super::{GpuContext, kernels};
use crate::flow::{Flow, FlowModel, RadialConditioner, RadialFlow};
use crate::rng::Rng;
use crate::target::Target;
#[cfg(not(target_arch = "wasm32"))]
use crate::train::Trainer;
use crate::train::{Loss, TrainError, TrainSettings};

const WORKGROUP: u32 = 64;

/// The structure constants the kernel is specialized for.
fn kernel_source(flow: &RadialFlow<f64>, energy: u32) -> Result<String, String> {
    let spec = &flow.spec;
    let order = match spec.conditioner {
        RadialConditioner::Direct => 0,
        RadialConditioner::Fourier { order } => order,
    };
    if spec.dim > 16 {
        return Err("the GPU radial kernel takes up to 16 dimensions".into());
    }
    let radial = include_str!("shaders/radial.wgsl")
        .replace("{D}", &spec.dim.to_string())
        .replace("{ORDER}", &order.to_string())
        .replace("{NPARAMS}", &spec.n_params().to_string());
    Ok(format!(
        "{}\n{}\n{}",
        kernels::stack_source(&spec.stack)?,
        kernels::energy_source(energy),
        radial
    ))
}

/// Workgroups for `n` points, one thread each (WebGPU allows 65,535 per dimension).
fn dispatch_size(n: usize) -> Result<u32, String> {
    let groups = n.div_ceil(WORKGROUP as usize);
    if groups > 65_535 {
        return Err(format!(
            "{n} points in one dispatch; the limit is {}",
            65_535 * WORKGROUP as usize
        ));
    }
    Ok(groups as u32)
}

/// A radial flow's training state on the GPU.
pub struct GpuRadialTrainer {
    ctx: GpuContext,
    flow: RadialFlow<f64>,
    target: Target,
    settings: TrainSettings,
    rng: Rng,
    steps: usize,
    /// density direction: forward-KL gradients, and log q for grids
    grad: wgpu::ComputePipeline,
    /// sampling direction with reverse mode: reverse-KL gradients
    reverse: Option<wgpu::ComputePipeline>,
    push: wgpu::ComputePipeline,
    reduce: wgpu::ComputePipeline,
    adam: wgpu::ComputePipeline,
    params: wgpu::Buffer,
    backup: [wgpu::Buffer; 3],
    m: wgpu::Buffer,
    v: wgpu::Buffer,
    points: wgpu::Buffer,
    per_sample: wgpu::Buffer,
    total: wgpu::Buffer,
    /// unused by training: the density output binding needs a buffer
    no_log_q: wgpu::Buffer,
    batch_settings: wgpu::Buffer,
    sizes: wgpu::Buffer,
    adam_settings: wgpu::Buffer,
}

impl GpuRadialTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, String> {
        let FlowModel::Radial(flow) = model else {
            return Err(
                "the GPU backend trains radial flows so far; use --backend cpu for this flow"
                    .into(),
            );
        };
        let energy = kernels::energy_id(settings.loss, &target)?;
        if energy != 0 && flow.dim() != 2 {
            return Err("the GPU energies are 2D".into());
        }
        if flow.dim() != target.dim() {
            return Err(format!(
                "the flow is {}D but target '{}' is {}D",
                flow.dim(),
                target.name(),
                target.dim()
            ));
        }
        if settings.batch == 0
            || !(settings.learning_rate > 0.0 && (settings.learning_rate as f32).is_finite())
        {
            return Err(
                "batch size must be at least 1 and the learning rate positive and finite in f32"
                    .into(),
            );
        }
        // Every sample writes its own gradient row: check the device holds them.
        let per_sample_bytes = (settings.batch as u64) * (flow.n_params() as u64 + 1) * 4;
        let limits = ctx.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if per_sample_bytes > max {
            return Err(format!(
                "batch {} needs {} MB of per-sample gradients on the GPU, more than this device allows ({} MB); use a smaller batch",
                settings.batch,
                per_sample_bytes >> 20,
                max >> 20
            ));
        }
        let source = kernel_source(&flow, energy)?;
        let reverse =
            (energy != 0).then(|| ctx.pipeline_at("radial reverse", &source, "grad_reverse_main"));
        let grad = ctx.pipeline_at("radial grad", &source, "grad_main");
        let push = ctx.pipeline_at("radial push", &source, "push_main");
        let reduce = ctx.pipeline_at(
            "reduce",
            include_str!("shaders/optimizer.wgsl"),
            "reduce_main",
        );
        let adam = ctx.pipeline_at("adam", include_str!("shaders/adam.wgsl"), "adam_main");
        let n_params = flow.n_params();
        let d = flow.dim();
        let p32: Vec<f32> = flow.params().iter().map(|&v| v as f32).collect();
        let zeros = vec![0u8; n_params * 4];
        let b = settings.batch;
        let params = ctx.storage("params", bytemuck::cast_slice(&p32), true);
        let backup = [
            ctx.storage("params backup", &zeros, true),
            ctx.storage("m backup", &zeros, true),
            ctx.storage("v backup", &zeros, true),
        ];
        let m = ctx.storage("adam m", &zeros, true);
        let v = ctx.storage("adam v", &zeros, true);
        let points = ctx.storage("points", &vec![0u8; b * d * 4], false);
        let per_sample = ctx.storage("per sample", &vec![0u8; b * (n_params + 1) * 4], true);
        let total = ctx.storage("total", &vec![0u8; (n_params + 1) * 4], true);
        let no_log_q = ctx.storage("log q (unused)", &[0u8; 4], true);
        let batch_settings = ctx.uniform(
            "batch",
            bytemuck::cast_slice(&[b as u32, (1.0 / b as f32).to_bits(), 0, 0]),
        );
        let sizes = ctx.uniform(
            "sizes",
            bytemuck::cast_slice(&[b as u32, n_params as u32 + 1, 0, 0]),
        );
        let adam_settings = ctx.uniform("adam", &[0u8; 16]);
        Ok(Self {
            rng: Rng::seeded(settings.seed ^ 0x7261_696e),
            ctx,
            flow,
            target,
            settings,
            steps: 0,
            grad,
            reverse,
            push,
            reduce,
            adam,
            params,
            backup,
            m,
            v,
            points,
            per_sample,
            total,
            no_log_q,
            batch_settings,
            sizes,
            adam_settings,
        })
    }

    /// Records the loss-and-gradient passes for the uploaded batch.
    fn encode_gradient(&self, encoder: &mut wgpu::CommandEncoder) {
        let n_params = self.flow.n_params() as u32;
        let (pipeline, bind_grad) = match &self.reverse {
            Some(reverse) => (
                reverse,
                self.ctx.bind(
                    reverse,
                    &[
                        &self.batch_settings,
                        &self.params,
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
                        &self.params,
                        &self.points,
                        &self.per_sample,
                        &self.no_log_q,
                    ],
                ),
            ),
        };
        let bind_reduce = self
            .ctx
            .bind(&self.reduce, &[&self.sizes, &self.per_sample, &self.total]);
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_grad, &[]);
        pass.dispatch_workgroups((self.settings.batch as u32).div_ceil(WORKGROUP), 1, 1);
        pass.set_pipeline(&self.reduce);
        pass.set_bind_group(0, &bind_reduce, &[]);
        pass.dispatch_workgroups((n_params + 1).div_ceil(WORKGROUP), 1, 1);
    }

    /// Mean loss and gradient at the current parameters for `points` (n x d,
    /// float32: target samples, or latent points for reverse KL), without
    /// updating them: what the parity tests compare.
    pub async fn loss_and_grad_async(&mut self, points: &[f32]) -> Result<(f64, Vec<f64>), String> {
        let d = self.flow.dim();
        if points.len() != self.settings.batch * d {
            return Err(format!(
                "expected a batch of {} points",
                self.settings.batch
            ));
        }
        self.ctx
            .queue
            .write_buffer(&self.points, 0, bytemuck::cast_slice(points));
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        self.encode_gradient(&mut encoder);
        self.ctx.queue.submit([encoder.finish()]);
        let bytes = self
            .ctx
            .read_back_async(&self.total, 0, self.total.size())
            .await?;
        let total: &[f32] = bytemuck::cast_slice(&bytes);
        Ok((
            total[0] as f64,
            total[1..].iter().map(|&g| g as f64).collect(),
        ))
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
    ) -> Result<(), String> {
        let groups = dispatch_size(n)?;
        let settings = self.ctx.uniform(
            "density",
            bytemuck::cast_slice(&[n as u32, 0f32.to_bits(), 1, 0]),
        );
        let bind = self.ctx.bind(
            &self.grad,
            &[&settings, &self.params, points, &self.no_log_q, log_q],
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
    ) -> Result<(), String> {
        let groups = dispatch_size(n)?;
        let settings = self.ctx.uniform(
            "push",
            bytemuck::cast_slice(&[n as u32, 0f32.to_bits(), 0, 0]),
        );
        let bind = self.ctx.bind_at(
            &self.push,
            &[(0, &settings), (1, &self.params), (2, latent), (5, pushed)],
        );
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.push);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
        Ok(())
    }

    /// `log q(x)` at every point (n x d), read back (in chunks of 65,536 points).
    pub async fn log_q_async(&self, points: &[f32]) -> Result<Vec<f32>, String> {
        let d = self.flow.dim();
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
    pub async fn x_from_z_async(&self, latent: &[f32]) -> Result<Vec<f32>, String> {
        let d = self.flow.dim();
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

    /// [`Self::loss_and_grad_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn loss_and_grad(&mut self, points: &[f32]) -> Result<(f64, Vec<f64>), String> {
        pollster::block_on(self.loss_and_grad_async(points))
    }

    /// [`Self::log_q_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn log_q(&self, points: &[f32]) -> Result<Vec<f32>, String> {
        pollster::block_on(self.log_q_async(points))
    }

    /// [`Self::x_from_z_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn x_from_z(&self, latent: &[f32]) -> Result<Vec<f32>, String> {
        pollster::block_on(self.x_from_z_async(latent))
    }

    /// The next batch: target samples (forward KL) or latent normals (reverse KL),
    /// drawn as the CPU trainer draws them.
    fn draw_batch(&mut self) -> Vec<f32> {
        let b = self.settings.batch;
        match self.settings.loss {
            Loss::ForwardKl => self
                .target
                .sample(b, &mut self.rng)
                .unwrap_or_default()
                .into_iter()
                .map(|v| v as f32)
                .collect(),
            Loss::ReverseKl => (0..b * self.flow.dim())
                .map(|_| self.rng.normal() as f32)
                .collect(),
        }
    }
}

impl GpuRadialTrainer {
    /// Records and submits step `t` (1-based, for Adam's bias correction):
    /// the batch drawn and uploaded, gradient and Adam on the GPU; with
    /// `backup` the state is first copied aside; with `history` the step's loss
    /// is copied to that buffer at that byte offset. Nothing is read back.
    fn submit_step(&mut self, t: i32, backup: bool, history: Option<(&wgpu::Buffer, u64)>) {
        let batch = self.draw_batch();
        self.ctx
            .queue
            .write_buffer(&self.points, 0, bytemuck::cast_slice(&batch));
        let adam = [
            self.flow.n_params() as u32,
            (self.settings.learning_rate as f32).to_bits(),
            ((1.0 / (1.0 - 0.9f64.powi(t))) as f32).to_bits(),
            ((1.0 / (1.0 - 0.999f64.powi(t))) as f32).to_bits(),
        ];
        self.ctx
            .queue
            .write_buffer(&self.adam_settings, 0, bytemuck::cast_slice(&adam));
        let size = (self.flow.n_params() * 4) as u64;
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        // Keep the state before the step, to restore it if the step produces NaN.
        if backup {
            for (src, dst) in [&self.params, &self.m, &self.v]
                .into_iter()
                .zip(&self.backup)
            {
                encoder.copy_buffer_to_buffer(src, 0, dst, 0, size);
            }
        }
        self.encode_gradient(&mut encoder);
        {
            let bind = self.ctx.bind(
                &self.adam,
                &[
                    &self.adam_settings,
                    &self.total,
                    &self.params,
                    &self.m,
                    &self.v,
                ],
            );
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.adam);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups((self.flow.n_params() as u32).div_ceil(WORKGROUP), 1, 1);
        }
        if let Some((buffer, offset)) = history {
            encoder.copy_buffer_to_buffer(&self.total, 0, buffer, offset, 4);
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// `n` optimizer steps submitted back to back, with one read-back of their
    /// losses at the end (a browser's read-back takes a frame or more, so one
    /// per step would cap training at the frame rate). If any step's loss is
    /// not finite, the state from before the first of them is restored.
    pub async fn steps_async(&mut self, n: usize) -> Result<Vec<f64>, TrainError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let history = self.ctx.storage("loss history", &vec![0u8; n * 4], true);
        for i in 0..n {
            let t = (self.steps + 1 + i) as i32;
            self.submit_step(t, i == 0, Some((&history, (i * 4) as u64)));
        }
        let bytes = self
            .ctx
            .read_back_async(&history, 0, history.size())
            .await
            .map_err(TrainError::Backend)?;
        let losses: Vec<f64> = bytemuck::cast_slice::<u8, f32>(&bytes)
            .iter()
            .map(|&v| v as f64)
            .collect();
        if let Some(bad) = losses.iter().position(|v| !v.is_finite()) {
            self.restore_backup();
            return Err(TrainError::NonFinite {
                step: self.steps + bad + 1,
            });
        }
        self.steps += n;
        Ok(losses)
    }

    /// Copies the backed-up state (parameters and Adam moments) back.
    fn restore_backup(&self) {
        let size = self.params.size();
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        for (dst, src) in [&self.params, &self.m, &self.v]
            .into_iter()
            .zip(&self.backup)
        {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, size);
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// One optimizer step: the batch drawn and uploaded, gradient and Adam on
    /// the GPU; resolves with the batch loss once the GPU has run it.
    pub async fn step_async(&mut self) -> Result<f64, TrainError> {
        self.submit_step((self.steps + 1) as i32, true, None);
        // The loss and gradient of this step (one read-back per step: the CLI's
        // way; the app runs `steps_async`).
        let bytes = self
            .ctx
            .read_back_async(&self.total, 0, self.total.size())
            .await
            .map_err(TrainError::Backend)?;
        let total: &[f32] = bytemuck::cast_slice(&bytes);
        if total.iter().any(|v| !v.is_finite()) {
            self.restore_backup();
            return Err(TrainError::NonFinite {
                step: self.steps + 1,
            });
        }
        self.steps += 1;
        Ok(total[0] as f64)
    }

    /// The current model, read back from the GPU.
    pub async fn model_async(&self) -> FlowModel<f64> {
        let params: Vec<f64> = match self
            .ctx
            .read_back_async(&self.params, 0, self.params.size())
            .await
        {
            Ok(bytes) => bytemuck::cast_slice::<u8, f32>(&bytes)
                .iter()
                .map(|&v| v as f64)
                .collect(),
            Err(_) => self.flow.params().to_vec(),
        };
        match RadialFlow::from_params(self.flow.spec.clone(), params) {
            Ok(f) => FlowModel::Radial(f),
            Err(_) => FlowModel::Radial(self.flow.clone()),
        }
    }
}

impl GpuRadialTrainer {
    /// The device the trainer runs on (for buffers the app shares with it).
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Steps applied so far.
    pub fn steps_done(&self) -> usize {
        self.steps
    }

    /// Replaces the parameters (same structure), keeping the optimizer state.
    pub fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        let FlowModel::Radial(f) = model else {
            return Err("the GPU trainer holds a radial flow".into());
        };
        if f.spec != self.flow.spec {
            return Err("the new model has a different structure".into());
        }
        let p32: Vec<f32> = f.params().iter().map(|&v| v as f32).collect();
        self.ctx
            .queue
            .write_buffer(&self.params, 0, bytemuck::cast_slice(&p32));
        self.flow = f.clone();
        Ok(())
    }

    /// The learning rate of the following steps.
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.settings.learning_rate = lr;
    }

    /// Human-readable backend, e.g. "GPU (llvmpipe, f32)".
    pub fn backend(&self) -> String {
        format!("GPU ({}, f32)", self.ctx.adapter_name)
    }
}

/// Natively the GPU trainers are [`Trainer`]s that wait for the GPU; in a
/// browser the app awaits `step_async` and `model_async` instead.
#[cfg(not(target_arch = "wasm32"))]
impl Trainer for GpuRadialTrainer {
    fn step(&mut self) -> Result<f64, TrainError> {
        pollster::block_on(self.step_async())
    }

    fn steps_done(&self) -> usize {
        GpuRadialTrainer::steps_done(self)
    }

    fn model(&self) -> FlowModel<f64> {
        pollster::block_on(self.model_async())
    }

    fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        GpuRadialTrainer::set_model(self, model)
    }

    fn set_learning_rate(&mut self, lr: f64) {
        GpuRadialTrainer::set_learning_rate(self, lr);
    }

    fn backend(&self) -> String {
        GpuRadialTrainer::backend(self)
    }
}
