//! What every GPU trainer shares: Adam on GPU-resident parameters, a backup
//! of its state to restore when a step produces NaN, the batches drawn on the
//! CPU as the CPU trainer draws them, and the step loop (one read-back per
//! batch of steps). A flow's trainer adds only its loss-and-gradient kernels
//! ([`FlowKernels`]).

use super::GpuContext;
use crate::flow::FlowModel;
use crate::gpu::GpuError;
use crate::rng::Rng;
use crate::target::Target;
use crate::train::SetupError;
use crate::train::{TrainError, TrainSettings};

/// Adam's state and the batch stream of one GPU training run.
pub struct GpuOptimizer {
    pub ctx: GpuContext,
    pub settings: TrainSettings,
    /// steps applied so far
    pub steps: usize,
    /// the flow's parameters (float32), read by its kernels
    pub params: wgpu::Buffer,
    /// the batch's mean loss, then its gradient, written by the flow's kernels
    pub total: wgpu::Buffer,
    m: wgpu::Buffer,
    v: wgpu::Buffer,
    /// parameters, m and v before the last batch of steps
    backup: [wgpu::Buffer; 3],
    adam_settings: wgpu::Buffer,
    adam: wgpu::ComputePipeline,
    adam_bind: wgpu::BindGroup,
    n_params: usize,
    target: Target,
    dim: usize,
    rng: Rng,
}

impl GpuOptimizer {
    /// Adam at step 0 for `params`, drawing `dim`-dimensional batches for `target`.
    pub fn new(
        ctx: &GpuContext,
        params: &[f64],
        dim: usize,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, GpuError> {
        if settings.batch == 0
            || !(settings.learning_rate > 0.0 && (settings.learning_rate as f32).is_finite())
        {
            return Err(GpuError::unsupported(
                "batch size must be at least 1 and the learning rate positive and finite in f32",
            ));
        }
        let n_params = params.len();
        let p32: Vec<f32> = params.iter().map(|&v| v as f32).collect();
        let zeros = vec![0u8; n_params * 4];
        let params = ctx.storage("params", bytemuck::cast_slice(&p32), true);
        let total = ctx.storage("loss and gradient", &vec![0u8; (n_params + 1) * 4], true);
        let m = ctx.storage("adam m", &zeros, true);
        let v = ctx.storage("adam v", &zeros, true);
        let backup = [
            ctx.storage("params backup", &zeros, true),
            ctx.storage("m backup", &zeros, true),
            ctx.storage("v backup", &zeros, true),
        ];
        let adam_settings = ctx.uniform("adam", &[0u8; 16]);
        let source = super::shader::compose("adam.wgsl", &[])?;
        let adam = ctx.pipeline_at("adam", &source, "adam_main");
        let adam_bind = ctx.bind(&adam, &[&adam_settings, &total, &params, &m, &v]);
        Ok(Self {
            rng: Rng::seeded(settings.seed ^ 0x7261_696e),
            ctx: ctx.clone(),
            settings,
            steps: 0,
            params,
            total,
            m,
            v,
            backup,
            adam_settings,
            adam,
            adam_bind,
            n_params,
            target,
            dim,
        })
    }

    /// The next batch: target samples (forward KL) or latent normals (reverse
    /// KL), drawn as the CPU trainer draws them.
    fn draw_batch(&mut self) -> Vec<f32> {
        crate::train::draw_batch(&self.target, &self.settings, &mut self.rng)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// Records a copy of the parameters and moments into the backup.
    fn encode_backup(&self, encoder: &mut wgpu::CommandEncoder) {
        for (src, dst) in [&self.params, &self.m, &self.v]
            .into_iter()
            .zip(&self.backup)
        {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, src.size());
        }
    }

    /// Records Adam's update for step `t` (1-based, for the bias correction)
    /// from the gradient in `total`.
    fn encode_update(&self, encoder: &mut wgpu::CommandEncoder, t: usize) {
        let t = t as i32;
        let adam = [
            self.n_params as u32,
            (self.settings.learning_rate as f32).to_bits(),
            ((1.0 / (1.0 - 0.9f64.powi(t))) as f32).to_bits(),
            ((1.0 / (1.0 - 0.999f64.powi(t))) as f32).to_bits(),
        ];
        // written before the submit that follows, so each step sees its own t
        self.ctx
            .queue
            .write_buffer(&self.adam_settings, 0, bytemuck::cast_slice(&adam));
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&self.adam);
        pass.set_bind_group(0, &self.adam_bind, &[]);
        pass.dispatch_workgroups((self.n_params as u32).div_ceil(64), 1, 1);
    }

    /// Copies the backed-up parameters and moments back.
    fn restore_backup(&self) {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        for (dst, src) in [&self.params, &self.m, &self.v]
            .into_iter()
            .zip(&self.backup)
        {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, src.size());
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// The parameters, read back from the GPU.
    pub async fn params_async(&self) -> Result<Vec<f64>, GpuError> {
        let bytes = self
            .ctx
            .read_back_async(&self.params, 0, self.params.size())
            .await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&bytes)
            .iter()
            .map(|&v| v as f64)
            .collect())
    }

    /// Replaces the parameters, keeping the moments.
    pub fn write_params(&self, params: &[f64]) {
        let p32: Vec<f32> = params.iter().map(|&v| v as f32).collect();
        self.ctx
            .queue
            .write_buffer(&self.params, 0, bytemuck::cast_slice(&p32));
    }

    /// Human-readable backend, e.g. "GPU (llvmpipe, f32)".
    pub fn backend(&self) -> String {
        format!("GPU ({}, f32)", self.ctx.adapter_name)
    }
}

/// A flow's own part of GPU training: its loss-and-gradient kernels and the
/// model its parameters describe.
pub trait FlowKernels {
    fn optimizer(&self) -> &GpuOptimizer;
    fn optimizer_mut(&mut self) -> &mut GpuOptimizer;
    /// Uploads `batch` and records the passes that write its mean loss and
    /// gradient into the optimizer's `total`.
    fn encode_gradient(&self, batch: &[f32], encoder: &mut wgpu::CommandEncoder);
    /// The model the trainer holds: its structure, with the parameters last
    /// known on the CPU.
    fn held(&self) -> &FlowModel<f64>;
    fn held_mut(&mut self) -> &mut FlowModel<f64>;

    /// The model with these parameters (the trainer's structure), or with the
    /// trainer's last known ones when `params` is `None`.
    fn model_with(&self, params: Option<Vec<f64>>) -> FlowModel<f64> {
        params
            .and_then(|p| self.held().with_params(p).ok())
            .unwrap_or_else(|| self.held().clone())
    }

    /// Takes `model` as the current one if it has the trainer's structure.
    fn accept_model(&mut self, model: &FlowModel<f64>) -> Result<(), SetupError> {
        if !self.held().same_structure(model) {
            return Err(SetupError::DifferentStructure);
        }
        *self.held_mut() = model.clone();
        Ok(())
    }
}

/// Records and submits step `t`: the batch drawn and uploaded, gradient and
/// Adam on the GPU; with `backup` the state is first copied aside; with
/// `history` the step's loss is copied to that buffer at that byte offset.
/// Nothing is read back.
fn submit_step<K: FlowKernels + ?Sized>(
    kernels: &mut K,
    t: usize,
    backup: bool,
    history: Option<(&wgpu::Buffer, u64)>,
) {
    let batch = kernels.optimizer_mut().draw_batch();
    let opt = kernels.optimizer();
    let mut encoder = opt.ctx.device.create_command_encoder(&Default::default());
    if backup {
        opt.encode_backup(&mut encoder);
    }
    kernels.encode_gradient(&batch, &mut encoder);
    opt.encode_update(&mut encoder, t);
    if let Some((buffer, offset)) = history {
        encoder.copy_buffer_to_buffer(&opt.total, 0, buffer, offset, 4);
    }
    opt.ctx.queue.submit([encoder.finish()]);
}

/// `n` optimizer steps submitted back to back, with one read-back of their
/// losses at the end (a browser's read-back takes a frame or more, so one per
/// step would cap training at the frame rate). If any step's loss is not
/// finite, the state from before the first of them is restored.
pub async fn steps_async<K: FlowKernels + ?Sized>(
    kernels: &mut K,
    n: usize,
) -> Result<Vec<f64>, TrainError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let first = kernels.optimizer().steps + 1;
    let history = kernels
        .optimizer()
        .ctx
        .storage("loss history", &vec![0u8; n * 4], true);
    for i in 0..n {
        submit_step(kernels, first + i, i == 0, Some((&history, (i * 4) as u64)));
    }
    let opt = kernels.optimizer_mut();
    let bytes = opt
        .ctx
        .read_back_async(&history, 0, history.size())
        .await
        .map_err(|e| TrainError::Backend(e.to_string()))?;
    let losses: Vec<f64> = bytemuck::cast_slice::<u8, f32>(&bytes)
        .iter()
        .map(|&v| v as f64)
        .collect();
    if let Some(bad) = losses.iter().position(|v| !v.is_finite()) {
        opt.restore_backup();
        return Err(TrainError::NonFinite { step: first + bad });
    }
    opt.steps += n;
    Ok(losses)
}

/// One optimizer step, resolving with the batch loss once the GPU has run it
/// (the CLI's way; the app runs [`steps_async`]). A step whose loss or
/// gradient is not finite is undone.
pub async fn step_async<K: FlowKernels + ?Sized>(kernels: &mut K) -> Result<f64, TrainError> {
    let t = kernels.optimizer().steps + 1;
    submit_step(kernels, t, true, None);
    let opt = kernels.optimizer_mut();
    let bytes = opt
        .ctx
        .read_back_async(&opt.total, 0, opt.total.size())
        .await
        .map_err(|e| TrainError::Backend(e.to_string()))?;
    let total: &[f32] = bytemuck::cast_slice(&bytes);
    if total.iter().any(|v| !v.is_finite()) {
        opt.restore_backup();
        return Err(TrainError::NonFinite { step: t });
    }
    opt.steps = t;
    Ok(total[0] as f64)
}

/// Mean loss and gradient at the current parameters for `batch` (n x d,
/// float32: target samples, or latent points for reverse KL), without
/// updating them: what the parity tests compare.
pub async fn loss_and_grad_async<K: FlowKernels + ?Sized>(
    kernels: &K,
    batch: &[f32],
) -> Result<(f64, Vec<f64>), GpuError> {
    let opt = kernels.optimizer();
    let n = opt.settings.batch;
    if batch.len() != n * opt.dim {
        return Err(GpuError::unsupported(format!(
            "expected a batch of {n} points of dimension {}",
            opt.dim
        )));
    }
    let mut encoder = opt.ctx.device.create_command_encoder(&Default::default());
    kernels.encode_gradient(batch, &mut encoder);
    opt.ctx.queue.submit([encoder.finish()]);
    let bytes = opt
        .ctx
        .read_back_async(&opt.total, 0, opt.total.size())
        .await?;
    let total: &[f32] = bytemuck::cast_slice(&bytes);
    Ok((
        total[0] as f64,
        total[1..].iter().map(|&g| g as f64).collect(),
    ))
}

/// The current model, read back from the GPU (the last known parameters if
/// the read-back fails).
pub async fn model_async<K: FlowKernels + ?Sized>(kernels: &K) -> FlowModel<f64> {
    let params = kernels.optimizer().params_async().await.ok();
    kernels.model_with(params)
}

/// Replaces the parameters (same structure), keeping the optimizer state.
pub fn set_model<K: FlowKernels + ?Sized>(
    kernels: &mut K,
    model: &FlowModel<f64>,
) -> Result<(), SetupError> {
    kernels.accept_model(model)?;
    kernels.optimizer().write_params(model.as_flow().params());
    Ok(())
}
