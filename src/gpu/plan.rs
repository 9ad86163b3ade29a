//! A dispatch plan: a fixed list of compute dispatches over one work buffer,
//! recorded once (settings in one uniform buffer, one bind group each) and
//! replayed every step. The coupling and lattice trainers each describe their
//! steps and display passes as a list of [`Op`]s of their own kernels; this
//! module records and replays any such list.

use super::{GpuContext, GpuError};
use crate::train::Loss;

/// Bytes between two operations' settings (WebGPU's uniform offset alignment).
pub const UNIFORM_STRIDE: u64 = 256;

/// What a list of operations computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Purpose {
    /// loss and gradient (forward KL in the density direction, reverse KL in
    /// the sampling direction)
    Train(Loss),
    /// log q at points
    LogQ,
    /// latent points through x_from_z, with log det
    Push,
}

/// A flow's kernel: which of the shared buffers it binds beside `work`
/// (binding 2): the parameters (binding 1) and the gradient (binding 3).
pub trait Kernel: Copy + PartialEq {
    fn binds_params(self) -> bool;
    fn binds_grad(self) -> bool;
}

/// One dispatch: its kernel, its settings (uniform words) and workgroups.
pub struct Op<K> {
    pub kernel: K,
    pub words: Vec<u32>,
    pub groups: [u32; 2],
}

/// A flow's compiled kernels.
pub struct Pipelines<K> {
    list: Vec<(K, wgpu::ComputePipeline)>,
}

impl<K: Kernel> Pipelines<K> {
    /// Compiles each `(kernel, label, source, entry point)`.
    pub fn new(ctx: &GpuContext, kernels: &[(K, &str, &str, &str)]) -> Self {
        let list = kernels
            .iter()
            .map(|&(kernel, label, source, entry)| (kernel, ctx.pipeline_at(label, source, entry)))
            .collect();
        Self { list }
    }

    /// The pipeline of `kernel`.
    pub fn of(&self, kernel: K) -> &wgpu::ComputePipeline {
        match self.list.iter().find(|(k, _)| *k == kernel) {
            Some((_, pipeline)) => pipeline,
            None => unreachable!("every kernel a plan uses is compiled with it"),
        }
    }
}

/// A recorded operation list with its work buffer, for `n` points.
pub struct Plan<K> {
    pub purpose: Purpose,
    /// points (or fields) the plan is recorded for
    pub n: usize,
    pub work: wgpu::Buffer,
    /// kept alive for the bind groups
    _uniforms: wgpu::Buffer,
    binds: Vec<(K, wgpu::BindGroup, [u32; 2])>,
}

impl<K: Kernel> Plan<K> {
    /// Records `ops` for `n` points over a fresh work buffer of `work_floats`
    /// floats, binding the flow's `params` and `grad` where a kernel uses them.
    pub fn record(
        ctx: &GpuContext,
        label: &str,
        pipelines: &Pipelines<K>,
        ops: Vec<Op<K>>,
        (purpose, n, work_floats): (Purpose, usize, usize),
        [params, grad]: [&wgpu::Buffer; 2],
    ) -> Self {
        let mut settings = vec![0u8; ops.len() * UNIFORM_STRIDE as usize];
        for (i, op) in ops.iter().enumerate() {
            let bytes: &[u8] = bytemuck::cast_slice(&op.words);
            let at = i * UNIFORM_STRIDE as usize;
            settings[at..at + bytes.len()].copy_from_slice(bytes);
        }
        let uniforms = ctx.uniform(&format!("{label} operations"), &settings);
        let work = ctx.storage(&format!("{label} work"), &vec![0u8; work_floats * 4], true);
        let binds = ops
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let range = (
                    &uniforms,
                    i as u64 * UNIFORM_STRIDE,
                    op.words.len() as u64 * 4,
                );
                // (a layout derived from a shader has only the bindings it uses)
                let mut buffers = vec![(2, &work)];
                if op.kernel.binds_params() {
                    buffers.insert(0, (1, params));
                }
                if op.kernel.binds_grad() {
                    buffers.push((3, grad));
                }
                let bind = ctx.bind_with_uniform_range(pipelines.of(op.kernel), range, &buffers);
                (op.kernel, bind, op.groups)
            })
            .collect();
        Self {
            purpose,
            n,
            work,
            _uniforms: uniforms,
            binds,
        }
    }

    /// Records the plan's dispatches in one compute pass.
    pub fn encode(&self, pipelines: &Pipelines<K>, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for (kernel, bind, groups) in &self.binds {
            pass.set_pipeline(pipelines.of(*kernel));
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], 1);
        }
    }

    /// Its dispatches.
    pub fn dispatches(&self) -> usize {
        self.binds.len()
    }

    /// Writes `points` at the start of the work buffer (the plan's input).
    pub fn upload(&self, ctx: &GpuContext, points: &[f32]) {
        ctx.queue
            .write_buffer(&self.work, 0, bytemuck::cast_slice(points));
    }
}

/// The most workgroups along one dimension of a dispatch.
const MAX_GROUPS: usize = 65_535;

/// `groups` workgroups as a 2D grid of dispatch sizes (the kernels flatten it
/// back).
pub fn grid(groups: usize) -> [u32; 2] {
    let total = groups.max(1);
    let x = total.min(MAX_GROUPS);
    [x as u32, total.div_ceil(x) as u32]
}

/// `batch_sum.wgsl`'s settings: the `n` loss terms at `loss` into the batch
/// loss, checking the `n_grad` gradient entries.
pub fn batch_sum_words(n: usize, loss: usize, n_grad: usize) -> Vec<u32> {
    vec![n as u32, loss as u32, n_grad as u32, 0]
}

/// Refuses a batch whose work buffer of `need` bytes the device cannot bind.
pub fn check_fits(ctx: &GpuContext, batch: usize, need: u64) -> Result<(), GpuError> {
    let max = max_binding_bytes(ctx);
    if need > max {
        return Err(GpuError::BatchTooLarge {
            batch,
            need_mb: need >> 20,
            max_mb: max >> 20,
        });
    }
    Ok(())
}

/// The largest buffer the device binds as storage.
pub fn max_binding_bytes(ctx: &GpuContext) -> u64 {
    let limits = ctx.device.limits();
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
}
