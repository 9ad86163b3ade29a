//! Training coupling flows on the GPU. A coupling layer is a dense ResNet
//! conditioner (matrix products, `matmul.wgsl`) feeding scalar stacks on the
//! active coordinates (`coupling_stacks.wgsl`), so a step is a fixed list of small
//! dispatches, recorded once and replayed: per layer its conditioner and
//! stacks forward; the loss; per layer backwards the conditioner again (only
//! the layer snapshots are kept, so memory does not grow with depth x batch),
//! the stacks' reverse mode and the conditioner's backward products (weight
//! gradients are products that sum over the batch: no atomics); then the batch
//! sum and Adam. Every operation's settings sit in one uniform buffer, written
//! once.

use super::optimizer::{FlowKernels, GpuOptimizer};
use super::specialize::{energy_id, energy_value, stack_values};
use super::{GpuContext, shader};
use crate::flow::{CouplingFlow, CouplingSpec, Flow, FlowModel};
use crate::target::Target;
use crate::train::{Loss, TrainSettings};

/// Bytes between two operations' settings (WebGPU's uniform offset alignment).
const UNIFORM_STRIDE: u64 = 256;
/// The largest display chunk, in points.
const MAX_CHUNK: usize = 65_536;
/// Display chunks keep their work buffer under this many bytes.
const DISPLAY_BYTES: u64 = 64 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Kernel {
    Matmul,
    Couple,
    CoupleBack,
    Loss,
    Sum,
}

/// One dispatch: its kernel, its settings (uniform words) and workgroups.
struct Op {
    kernel: Kernel,
    words: Vec<u32>,
    groups: [u32; 2],
}

/// Where a matrix operand lives: offset, row stride, column stride (in floats).
#[derive(Clone, Copy)]
struct Operand(u32, u32, u32);

// matmul.wgsl flags
const GELU_A: u32 = 1;
const ONES_COLUMN: u32 = 2;
const ONES_ROW: u32 = 4;
const B_PARAMS: u32 = 8;
const C_GRAD: u32 = 16;
const ADD_R: u32 = 1 << 5;
const ADD_R_GELU_PRIME: u32 = 2 << 5;

/// `C (m x n) = A (m x k) B (k x n)` with the flags of `matmul.wgsl`; R and H
/// (offsets) share C's strides.
fn matmul(dims: [usize; 3], flags: u32, a: Operand, b: Operand, c: Operand, rh: [u32; 2]) -> Op {
    let [m, n, k] = dims;
    let words = vec![
        m as u32, n as u32, k as u32, flags, a.0, a.1, a.2, 0, b.0, b.1, b.2, 0, c.0, c.1, c.2, 0,
        rh[0], rh[1], 0, 0,
    ];
    Op {
        kernel: Kernel::Matmul,
        words,
        groups: [n.div_ceil(16) as u32, m.div_ceil(16) as u32],
    }
}

/// `batch_sum.wgsl`'s operation: the `n` loss terms at `loss` into the batch loss,
/// checking the `n_grad` gradient entries.
pub(super) fn sum_op_words(n: usize, loss: usize, n_grad: usize) -> Vec<u32> {
    vec![n as u32, loss as u32, n_grad as u32, 0]
}

fn sum_op(n: usize, loss: usize, n_grad: usize) -> Op {
    Op {
        kernel: Kernel::Sum,
        words: sum_op_words(n, loss, n_grad),
        groups: [1, 1],
    }
}

/// What a list of operations computes.
#[derive(Clone, Copy, PartialEq)]
enum Purpose {
    /// loss and gradient (forward KL in the density direction, reverse KL in
    /// the sampling direction)
    Train(Loss),
    /// log q at points
    LogQ,
    /// latent points through x_from_z, with log det
    Push,
}

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` points.
struct Layout {
    n: usize,
    ld: usize,
    hidden: usize,
    raw: usize,
    raw_bar: usize,
    h_bar: [usize; 2],
    bar: usize,
    loss: usize,
    out: usize,
    total: usize,
}

impl Layout {
    fn new(spec: &CouplingSpec, n_out: usize, n: usize) -> Self {
        let (d, w) = (spec.dim, spec.width);
        let ld = (spec.layers + 1) * n * d;
        let hidden = ld + n;
        let raw = hidden + (spec.depth + 1) * n * w;
        let raw_bar = raw + n * n_out;
        let h_bar = [raw_bar + n * n_out, raw_bar + n * n_out + n * w];
        let bar = h_bar[1] + n * w;
        let loss = bar + n * d;
        let out = loss + n;
        Self {
            n,
            ld,
            hidden,
            raw,
            raw_bar,
            h_bar,
            bar,
            loss,
            out,
            total: out + n * (d + 1),
        }
    }

    /// The input of the `s`-th applied layer (s = layers: the flow's output).
    fn snap(&self, spec: &CouplingSpec, s: usize) -> usize {
        s * self.n * spec.dim
    }

    fn hidden(&self, spec: &CouplingSpec, k: usize) -> usize {
        self.hidden + k * self.n * spec.width
    }
}

/// Builds the operation lists of one coupling flow.
struct Planner<'a> {
    spec: &'a CouplingSpec,
    /// conditioner outputs per sample, the widest layer's (the row stride of raw)
    n_out: usize,
    lay: Layout,
    inv_n: f32,
}

impl Planner<'_> {
    fn u(v: usize) -> u32 {
        v as u32
    }

    /// The conditioner of layer `l` on snapshot `s`: hidden states and raw.
    fn mlp_forward(&self, l: usize, s: usize, ops: &mut Vec<Op>) {
        let (spec, lay, u) = (self.spec, &self.lay, Self::u);
        let shape = spec.mlp(l);
        let off = spec.layer_offset(l);
        let (_, passive) = spec.split(l);
        let (n, w, d) = (lay.n, spec.width, spec.dim);
        let input = Operand(u(lay.snap(spec, s) + passive[0]), u(d), 2);
        let (k0, _, rows, _) = shape.layer(0);
        ops.push(matmul(
            [n, w, rows + 1],
            ONES_COLUMN | B_PARAMS,
            input,
            Operand(u(off + k0.start), u(w), 1),
            Operand(u(lay.hidden(spec, 0)), u(w), 1),
            [0, 0],
        ));
        for k in 1..=spec.depth {
            let (kr, _, _, _) = shape.layer(k);
            let prev = lay.hidden(spec, k - 1);
            ops.push(matmul(
                [n, w, w + 1],
                GELU_A | ONES_COLUMN | B_PARAMS | ADD_R,
                Operand(u(prev), u(w), 1),
                Operand(u(off + kr.start), u(w), 1),
                Operand(u(lay.hidden(spec, k)), u(w), 1),
                [u(prev), 0],
            ));
        }
        let (kr, _, _, cols) = shape.layer(spec.depth + 1);
        ops.push(matmul(
            [n, cols, w + 1],
            ONES_COLUMN | B_PARAMS,
            Operand(u(lay.hidden(spec, spec.depth)), u(w), 1),
            Operand(u(off + kr.start), u(cols), 1),
            Operand(u(lay.raw), u(self.n_out), 1),
            [0, 0],
        ));
    }

    /// Backward through layer `l`'s conditioner (its forward must be in place):
    /// raw_bar into the parameter gradient, and into bar's passive coordinates.
    fn mlp_backward(&self, l: usize, s: usize, ops: &mut Vec<Op>) {
        let (spec, lay, u) = (self.spec, &self.lay, Self::u);
        let shape = spec.mlp(l);
        let off = spec.layer_offset(l);
        let (_, passive) = spec.split(l);
        let (n, w, d) = (lay.n, spec.width, spec.dim);
        // the gradient buffer holds the loss first
        let g = |start: usize| u(1 + off + start);
        let (kr, _, _, cols) = shape.layer(spec.depth + 1);
        ops.push(matmul(
            [w + 1, cols, n],
            ONES_ROW | C_GRAD,
            Operand(u(lay.hidden(spec, spec.depth)), 1, u(w)),
            Operand(u(lay.raw_bar), u(self.n_out), 1),
            Operand(g(kr.start), u(cols), 1),
            [0, 0],
        ));
        ops.push(matmul(
            [n, w, cols],
            B_PARAMS,
            Operand(u(lay.raw_bar), u(self.n_out), 1),
            Operand(u(off + kr.start), 1, u(cols)),
            Operand(u(lay.h_bar[0]), u(w), 1),
            [0, 0],
        ));
        let mut cur = 0;
        for k in (1..=spec.depth).rev() {
            let (kr, _, _, _) = shape.layer(k);
            let prev = lay.hidden(spec, k - 1);
            ops.push(matmul(
                [w + 1, w, n],
                GELU_A | ONES_ROW | C_GRAD,
                Operand(u(prev), 1, u(w)),
                Operand(u(lay.h_bar[cur]), u(w), 1),
                Operand(g(kr.start), u(w), 1),
                [0, 0],
            ));
            // residual block: h_bar(k-1) = h_bar(k) + (h_bar(k) W^T) gelu'(h(k-1))
            ops.push(matmul(
                [n, w, w],
                B_PARAMS | ADD_R_GELU_PRIME,
                Operand(u(lay.h_bar[cur]), u(w), 1),
                Operand(u(off + kr.start), 1, u(w)),
                Operand(u(lay.h_bar[1 - cur]), u(w), 1),
                [u(lay.h_bar[cur]), u(prev)],
            ));
            cur = 1 - cur;
        }
        let (k0, _, rows, _) = shape.layer(0);
        ops.push(matmul(
            [rows + 1, w, n],
            ONES_ROW | C_GRAD,
            Operand(u(lay.snap(spec, s) + passive[0]), 2, u(d)),
            Operand(u(lay.h_bar[cur]), u(w), 1),
            Operand(g(k0.start), u(w), 1),
            [0, 0],
        ));
        let bar_passive = u(lay.bar + passive[0]);
        ops.push(matmul(
            [n, rows, w],
            B_PARAMS | ADD_R,
            Operand(u(lay.h_bar[cur]), u(w), 1),
            Operand(u(off + k0.start), 1, u(w)),
            Operand(bar_passive, u(d), 2),
            [bar_passive, 0],
        ));
    }

    /// coupling_stacks.wgsl's settings for layer `l` applied as the `s`-th layer.
    fn couple_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op {
        let (spec, lay, u) = (self.spec, &self.lay, Self::u);
        let (active, _) = spec.split(l);
        let words = vec![
            u(lay.n),
            u(lay.snap(spec, s)),
            u(lay.snap(spec, s + 1)),
            u(lay.raw),
            u(active[0]),
            u(active.len()),
            u32::from(!z_from_x),
            u(lay.ld),
            u(lay.bar),
            u(lay.raw_bar),
            self.inv_n.to_bits(),
            0,
            u32::from(s == 0),
            u(lay.loss),
            u(lay.out),
            u(lay.snap(spec, 0)),
        ];
        Op {
            kernel,
            words,
            groups: [lay.n.div_ceil(64) as u32, 1],
        }
    }

    /// The last operations: the loss (mode 0 forward KL, 1 reverse KL) or a
    /// display output (2 log q, 3 x and log det) from the final snapshot.
    fn loss_op(&self, mode: u32) -> Op {
        let (spec, lay, u) = (self.spec, &self.lay, Self::u);
        let mut op = self.couple_op(Kernel::Loss, 0, spec.layers, true);
        op.words[1] = u(lay.snap(spec, spec.layers));
        op.words[11] = mode;
        op
    }

    fn ops(&self, purpose: Purpose) -> Vec<Op> {
        let spec = self.spec;
        let z_from_x = matches!(purpose, Purpose::Train(Loss::ForwardKl) | Purpose::LogQ);
        let order: Vec<usize> = if z_from_x {
            (0..spec.layers).rev().collect()
        } else {
            (0..spec.layers).collect()
        };
        let mut ops = Vec::new();
        for (s, &l) in order.iter().enumerate() {
            self.mlp_forward(l, s, &mut ops);
            ops.push(self.couple_op(Kernel::Couple, l, s, z_from_x));
        }
        let mode = match purpose {
            Purpose::Train(Loss::ForwardKl) => 0,
            Purpose::Train(Loss::ReverseKl) => 1,
            Purpose::LogQ => 2,
            Purpose::Push => 3,
        };
        ops.push(self.loss_op(mode));
        if !matches!(purpose, Purpose::Train(_)) {
            return ops;
        }
        for (s, &l) in order.iter().enumerate().rev() {
            // the last layer's conditioner activations are still in place
            if s + 1 < order.len() {
                self.mlp_forward(l, s, &mut ops);
            }
            ops.push(self.couple_op(Kernel::CoupleBack, l, s, z_from_x));
            self.mlp_backward(l, s, &mut ops);
        }
        ops.push(sum_op(self.lay.n, self.lay.loss, spec.n_params()));
        ops
    }
}

/// The compiled kernels of one coupling flow.
struct Pipelines {
    matmul: wgpu::ComputePipeline,
    couple: wgpu::ComputePipeline,
    couple_back: wgpu::ComputePipeline,
    loss: wgpu::ComputePipeline,
    sum: wgpu::ComputePipeline,
}

/// A recorded operation list with its work buffer, for `n` points.
struct Plan {
    purpose: Purpose,
    lay: Layout,
    work: wgpu::Buffer,
    /// kept alive for the bind groups
    _uniforms: wgpu::Buffer,
    binds: Vec<(Kernel, wgpu::BindGroup, [u32; 2])>,
}

impl Plan {
    fn encode(&self, pipelines: &Pipelines, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for (kernel, bind, groups) in &self.binds {
            pass.set_pipeline(match kernel {
                Kernel::Matmul => &pipelines.matmul,
                Kernel::Couple => &pipelines.couple,
                Kernel::CoupleBack => &pipelines.couple_back,
                Kernel::Loss => &pipelines.loss,
                Kernel::Sum => &pipelines.sum,
            });
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], 1);
        }
    }
}

/// The bytes of the work buffer for `n` points.
fn work_bytes(spec: &CouplingSpec, n: usize) -> u64 {
    Layout::new(spec, max_out(spec), n).total as u64 * 4
}

fn max_out(spec: &CouplingSpec) -> usize {
    (0..spec.layers.min(2))
        .map(|l| spec.mlp(l).n_out)
        .max()
        .unwrap_or(0)
}

/// A coupling flow's training state on the GPU.
pub struct GpuCouplingTrainer {
    opt: GpuOptimizer,
    ctx: GpuContext,
    flow: CouplingFlow<f64>,
    pipelines: Pipelines,
    train: Plan,
    log_q_plan: Option<Plan>,
    push_plan: Option<Plan>,
}

impl GpuCouplingTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, String> {
        let FlowModel::Coupling(flow) = model else {
            return Err("the GPU coupling trainer takes a coupling flow".into());
        };
        let spec = flow.spec.clone();
        let energy = energy_id(settings.loss, &target)?;
        if energy != 0 && spec.dim != 2 {
            return Err("the GPU energies are 2D".into());
        }
        if spec.dim != target.dim() {
            return Err(format!(
                "the flow is {}D but target '{}' is {}D",
                spec.dim,
                target.name(),
                target.dim()
            ));
        }
        let limits = ctx.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let need = work_bytes(&spec, settings.batch);
        if need > max || settings.batch > MAX_CHUNK * 16 {
            return Err(format!(
                "batch {} needs {} MB of activations on the GPU, more than this device allows ({} MB); use a smaller batch",
                settings.batch,
                need >> 20,
                max >> 20
            ));
        }
        let mut values = stack_values(&spec.stack)?;
        values.extend([
            energy_value(energy),
            ("D", spec.dim.to_string()),
            ("NOUT", max_out(&spec).to_string()),
        ]);
        let compose = |root, values: &[shader::Value]| {
            shader::compose(root, values).map_err(|e| e.to_string())
        };
        let source = compose("coupling_stacks.wgsl", &values)?;
        let matmul_source = compose("matmul.wgsl", &[])?;
        let sum_source = compose("batch_sum.wgsl", &[])?;
        let pipelines = Pipelines {
            matmul: ctx.pipeline_at("coupling matmul", &matmul_source, "matmul_main"),
            couple: ctx.pipeline_at("coupling stacks", &source, "couple_main"),
            couple_back: ctx.pipeline_at("coupling stacks backward", &source, "couple_back_main"),
            loss: ctx.pipeline_at("coupling loss", &source, "loss_main"),
            sum: ctx.pipeline_at("coupling sum", &sum_source, "sum_main"),
        };
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
            flow,
            pipelines,
            train,
            log_q_plan: None,
            push_plan: None,
        })
    }

    /// Dispatches per training step: the recorded operations plus Adam.
    pub fn dispatches_per_step(&self) -> usize {
        self.train.binds.len() + 1
    }

    fn upload(&self, plan: &Plan, points: &[f32]) {
        self.ctx
            .queue
            .write_buffer(&plan.work, 0, bytemuck::cast_slice(points));
    }

    /// `log q(x)` at every point (n x d) with the current parameters, in chunks.
    pub async fn log_q_async(&mut self, points: &[f32]) -> Result<Vec<f32>, String> {
        self.display(Purpose::LogQ, points, 1).await
    }

    /// Latent points (n x d) pushed through `x_from_z`: per point the data-space
    /// point and `log |det dx/dz|` (n x (d + 1)), in chunks.
    pub async fn x_from_z_async(&mut self, latent: &[f32]) -> Result<Vec<f32>, String> {
        let d = self.flow.spec.dim;
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
    ) -> Result<(), String> {
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
    ) -> Result<(), String> {
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
    ) -> Result<(), String> {
        let spec = self.flow.spec.clone();
        let d = spec.dim;
        let width = if purpose == Purpose::LogQ { 1 } else { d + 1 };
        if input.size() < (n * d * 4) as u64 || output.size() < (n * width * 4) as u64 {
            return Err(format!("the display buffers are too small for {n} points"));
        }
        // the largest power-of-two chunk whose work buffer fits, no larger than needed
        let mut chunk = MAX_CHUNK.min(n.max(64).next_power_of_two());
        while chunk > 64 && work_bytes(&spec, chunk) > DISPLAY_BYTES {
            chunk /= 2;
        }
        let slot = match purpose {
            Purpose::LogQ => &mut self.log_q_plan,
            _ => &mut self.push_plan,
        };
        if slot
            .as_ref()
            .is_none_or(|p| p.lay.n != chunk || p.purpose != purpose)
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
                plan.lay.out as u64 * 4,
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
    ) -> Result<Vec<f32>, String> {
        let d = self.flow.spec.dim;
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

/// Records `purpose`'s operations for `n` points: settings, work buffer, bind groups.
fn build_plan(
    ctx: &GpuContext,
    pipelines: &Pipelines,
    spec: &CouplingSpec,
    n: usize,
    purpose: Purpose,
    [params, grad]: [&wgpu::Buffer; 2],
) -> Plan {
    let planner = Planner {
        spec,
        n_out: max_out(spec),
        lay: Layout::new(spec, max_out(spec), n),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let mut settings = vec![0u8; ops.len() * UNIFORM_STRIDE as usize];
    for (i, op) in ops.iter().enumerate() {
        let bytes: &[u8] = bytemuck::cast_slice(&op.words);
        let at = i * UNIFORM_STRIDE as usize;
        settings[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let uniforms = ctx.uniform("coupling operations", &settings);
    let work = ctx.storage("coupling work", &vec![0u8; planner.lay.total * 4], true);
    let binds = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let range = (
                &uniforms,
                i as u64 * UNIFORM_STRIDE,
                op.words.len() as u64 * 4,
            );
            let bind = match op.kernel {
                Kernel::Matmul => ctx.bind_with_uniform_range(
                    &pipelines.matmul,
                    range,
                    &[(1, params), (2, &work), (3, grad)],
                ),
                Kernel::Sum => {
                    ctx.bind_with_uniform_range(&pipelines.sum, range, &[(2, &work), (3, grad)])
                }
                Kernel::Couple | Kernel::CoupleBack | Kernel::Loss => {
                    let pipeline = match op.kernel {
                        Kernel::Couple => &pipelines.couple,
                        Kernel::CoupleBack => &pipelines.couple_back,
                        _ => &pipelines.loss,
                    };
                    ctx.bind_with_uniform_range(pipeline, range, &[(2, &work)])
                }
            };
            (op.kernel, bind, op.groups)
        })
        .collect();
    Plan {
        purpose,
        lay: planner.lay,
        work,
        _uniforms: uniforms,
        binds,
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
        self.upload(&self.train, batch);
        self.train.encode(&self.pipelines, encoder);
    }

    fn model_with(&self, params: Option<Vec<f64>>) -> FlowModel<f64> {
        let flow = params
            .and_then(|p| CouplingFlow::from_params(self.flow.spec.clone(), p).ok())
            .unwrap_or_else(|| self.flow.clone());
        FlowModel::Coupling(flow)
    }

    fn accept_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        let FlowModel::Coupling(f) = model else {
            return Err("the GPU trainer holds a coupling flow".into());
        };
        if f.spec != self.flow.spec {
            return Err("the new model has a different structure".into());
        }
        self.flow = f.clone();
        Ok(())
    }
}
