//! Training lattice coupling flows on the phi^4 field on the GPU, by reverse
//! KL. A layer is a convolutional conditioner (`conv3x3.wgsl`: periodic 3 x 3
//! convolutions computed directly, with a workgroup reduction per weight for
//! the gradient) feeding the scalar stacks of the active sites
//! (`lattice_sites.wgsl`). As for the coupling flows ([`super::coupling`]), a step
//! is a fixed list of dispatches recorded once and replayed: per layer the
//! masked input, the conditioner and the stacks; the action and the loss; per
//! layer backwards the conditioner again (only the field snapshots are kept),
//! the stacks' reverse mode, the conditioner's backward passes and the passive
//! sites' adjoints; then the batch sum and Adam.

use super::optimizer::{FlowKernels, GpuOptimizer};
use super::specialize::stack_values;
use super::{GpuContext, shader};
use crate::flow::{Flow, FlowModel, LatticeFlow, LatticeSpec};
use crate::target::Target;
use crate::target::phi4::Phi4;
use crate::train::{Loss, TrainSettings};

/// Bytes between two operations' settings (WebGPU's uniform offset alignment).
const UNIFORM_STRIDE: u64 = 256;
/// The most workgroups along one dimension of a dispatch.
const MAX_GROUPS: usize = 65_535;

#[derive(Clone, Copy, PartialEq)]
enum Kernel {
    Mask,
    Gelu,
    ConvForward,
    ConvInputGrad,
    ConvWeightGrad,
    Couple,
    CoupleBack,
    PassiveBar,
    Loss,
    Sum,
}

/// One dispatch: its kernel, its settings (uniform words) and workgroups.
struct Op {
    kernel: Kernel,
    words: Vec<u32>,
    groups: [u32; 2],
}

/// Workgroups for `items` items, `per` a workgroup, as a 2D grid (the kernels
/// flatten it back).
fn grid(items: usize, per: usize) -> [u32; 2] {
    let total = items.div_ceil(per).max(1);
    let x = total.min(MAX_GROUPS);
    [x as u32, total.div_ceil(x) as u32]
}

// conv3x3.wgsl flags
const RESIDUAL_GELU_PRIME: u32 = 2;
const FORWARD_ADD_R: u32 = 8;

/// What a list of operations computes.
#[derive(Clone, Copy, PartialEq)]
enum Purpose {
    /// reverse KL against the phi^4 action, and its gradient
    Train,
    /// log q at fields
    LogQ,
    /// latent fields through x_from_z, with log det
    Push,
}

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` fields.
struct Layout {
    n: usize,
    /// sites
    v: usize,
    /// conditioner rows: copies x n x V
    rows: usize,
    ld: usize,
    input: usize,
    hidden: usize,
    /// gelu of hidden states 0 .. depth - 1
    acts: usize,
    out: usize,
    out_bar: usize,
    h_bar: [usize; 2],
    in_bar: usize,
    bar: usize,
    loss: usize,
    display: usize,
    total: usize,
}

impl Layout {
    fn new(spec: &LatticeSpec, n: usize) -> Self {
        let v = spec.volume();
        let copies = if spec.z2 { 2 } else { 1 };
        let rows = copies * n * v;
        let (w, p) = (spec.width, spec.stack.n_raw());
        let ld = (spec.layers + 1) * n * v;
        let input = ld + n * v;
        let hidden = input + rows;
        let acts = hidden + (spec.depth + 1) * rows * w;
        let out = acts + spec.depth * rows * w;
        let out_bar = out + rows * p;
        let h_bar = [out_bar + rows * p, out_bar + rows * p + rows * w];
        let in_bar = h_bar[1] + rows * w;
        let bar = in_bar + rows;
        let loss = bar + n * v;
        let display = loss + n;
        Self {
            n,
            v,
            rows,
            ld,
            input,
            hidden,
            acts,
            out,
            out_bar,
            h_bar,
            in_bar,
            bar,
            loss,
            display,
            total: display + n * (v + 1),
        }
    }

    /// The input of the `s`-th applied layer (s = layers: the flow's output).
    fn snap(&self, s: usize) -> usize {
        s * self.n * self.v
    }

    fn hidden(&self, spec: &LatticeSpec, k: usize) -> usize {
        self.hidden + k * self.rows * spec.width
    }

    fn act(&self, spec: &LatticeSpec, k: usize) -> usize {
        self.acts + k * self.rows * spec.width
    }
}

/// One convolution's settings (`conv3x3.wgsl`'s `ConvOp`).
#[derive(Clone, Copy, Default)]
struct ConvOp {
    c_in: usize,
    c_out: usize,
    flags: u32,
    x: usize,
    y: usize,
    kernel: usize,
    r: usize,
    h: usize,
    dst: usize,
}

/// Builds the operation lists of one lattice flow.
struct Planner<'a> {
    spec: &'a LatticeSpec,
    lay: Layout,
    inv_n: f32,
}

impl Planner<'_> {
    fn conv(&self, kernel: Kernel, c: ConvOp) -> Op {
        let u = |v: usize| v as u32;
        let rows = self.lay.rows;
        let words = vec![
            u(rows),
            u(self.spec.size),
            u(c.c_in),
            u(c.c_out),
            c.flags,
            u(c.x),
            u(c.y),
            u(c.kernel),
            u(c.r),
            u(c.h),
            // the gradient buffer holds the loss first
            u(1 + c.kernel),
            u(c.dst),
        ];
        let groups = match kernel {
            Kernel::ConvForward => grid(rows * c.c_out, 64),
            Kernel::ConvInputGrad | Kernel::Gelu => grid(rows * c.c_in, 64),
            _ => grid((9 * c.c_in + 1) * c.c_out, 1),
        };
        Op {
            kernel,
            words,
            groups,
        }
    }

    /// Where layer `l`'s conv layer `k` kernel starts in the parameters.
    fn kernel_at(&self, l: usize, k: usize) -> usize {
        let shape = self.spec.conv();
        l * shape.n_params() + shape.layer(k).0.start
    }

    /// Layer `l`'s conditioner on its masked input: hidden states and raw.
    fn conv_forward(&self, l: usize, ops: &mut Vec<Op>) {
        let (spec, lay) = (self.spec, &self.lay);
        let (w, depth) = (spec.width, spec.depth);
        ops.push(self.conv(
            Kernel::ConvForward,
            ConvOp {
                c_in: 1,
                c_out: w,
                x: lay.input,
                y: lay.hidden(spec, 0),
                kernel: self.kernel_at(l, 0),
                ..ConvOp::default()
            },
        ));
        for k in 1..=depth {
            let prev = lay.hidden(spec, k - 1);
            let act = lay.act(spec, k - 1);
            ops.push(self.conv(
                Kernel::Gelu,
                ConvOp {
                    c_in: w,
                    x: prev,
                    y: act,
                    ..ConvOp::default()
                },
            ));
            ops.push(self.conv(
                Kernel::ConvForward,
                ConvOp {
                    c_in: w,
                    c_out: w,
                    flags: FORWARD_ADD_R,
                    x: act,
                    y: lay.hidden(spec, k),
                    kernel: self.kernel_at(l, k),
                    r: prev,
                    ..ConvOp::default()
                },
            ));
        }
        ops.push(self.conv(
            Kernel::ConvForward,
            ConvOp {
                c_in: w,
                c_out: spec.stack.n_raw(),
                x: lay.hidden(spec, depth),
                y: lay.out,
                kernel: self.kernel_at(l, depth + 1),
                ..ConvOp::default()
            },
        ));
    }

    /// Backward through layer `l`'s conditioner (its forward in place): the
    /// output adjoint into the parameter gradient and the input adjoint.
    fn conv_backward(&self, l: usize, ops: &mut Vec<Op>) {
        let (spec, lay) = (self.spec, &self.lay);
        let (w, depth) = (spec.width, spec.depth);
        let both = |ops: &mut Vec<Op>, c: ConvOp| {
            ops.push(self.conv(Kernel::ConvWeightGrad, c));
            ops.push(self.conv(Kernel::ConvInputGrad, c));
        };
        both(
            ops,
            ConvOp {
                c_in: w,
                c_out: spec.stack.n_raw(),
                x: lay.hidden(spec, depth),
                y: lay.out_bar,
                kernel: self.kernel_at(l, depth + 1),
                dst: lay.h_bar[0],
                ..ConvOp::default()
            },
        );
        let mut cur = 0;
        for k in (1..=depth).rev() {
            // residual block: h_bar(k-1) = h_bar(k) + (K^T h_bar(k)) gelu'(h(k-1))
            let prev = lay.hidden(spec, k - 1);
            both(
                ops,
                ConvOp {
                    c_in: w,
                    c_out: w,
                    flags: RESIDUAL_GELU_PRIME,
                    x: lay.act(spec, k - 1),
                    y: lay.h_bar[cur],
                    kernel: self.kernel_at(l, k),
                    r: lay.h_bar[cur],
                    h: prev,
                    dst: lay.h_bar[1 - cur],
                },
            );
            cur = 1 - cur;
        }
        both(
            ops,
            ConvOp {
                c_in: 1,
                c_out: w,
                x: lay.input,
                y: lay.h_bar[cur],
                kernel: self.kernel_at(l, 0),
                dst: lay.in_bar,
                ..ConvOp::default()
            },
        );
    }

    /// lattice_sites.wgsl's settings for layer `l` applied as the `s`-th layer.
    fn site_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op {
        let (spec, lay) = (self.spec, &self.lay);
        let u = |v: usize| v as u32;
        let parity = u32::from(l.is_multiple_of(2));
        let words = vec![
            u(lay.n),
            u(spec.size),
            parity,
            u32::from(!z_from_x),
            u(lay.snap(s)),
            u(lay.snap(s + 1)),
            u(lay.input),
            u(lay.out),
            u(lay.out_bar),
            u(lay.in_bar),
            u(lay.ld),
            u32::from(s == 0),
            u(lay.bar),
            self.inv_n.to_bits(),
            0,
            u(lay.loss),
            u(lay.display),
            u(lay.snap(0)),
            0,
            0,
        ];
        let items = match kernel {
            Kernel::Mask => lay.rows,
            Kernel::Loss => lay.n,
            _ => lay.n * lay.v,
        };
        Op {
            kernel,
            words,
            groups: grid(items, 64),
        }
    }

    fn ops(&self, purpose: Purpose) -> Vec<Op> {
        let spec = self.spec;
        let z_from_x = purpose == Purpose::LogQ;
        let order: Vec<usize> = if z_from_x {
            (0..spec.layers).rev().collect()
        } else {
            (0..spec.layers).collect()
        };
        let mut ops = Vec::new();
        let forward = |ops: &mut Vec<Op>, s: usize, l: usize| {
            ops.push(self.site_op(Kernel::Mask, l, s, z_from_x));
            self.conv_forward(l, ops);
        };
        for (s, &l) in order.iter().enumerate() {
            forward(&mut ops, s, l);
            ops.push(self.site_op(Kernel::Couple, l, s, z_from_x));
        }
        let mut loss = self.site_op(Kernel::Loss, 0, spec.layers, z_from_x);
        loss.words[4] = self.lay.snap(spec.layers) as u32;
        loss.words[14] = match purpose {
            Purpose::Train => 1,
            Purpose::LogQ => 2,
            Purpose::Push => 3,
        };
        ops.push(loss);
        if purpose != Purpose::Train {
            return ops;
        }
        for (s, &l) in order.iter().enumerate().rev() {
            // the last layer's conditioner activations are still in place
            if s + 1 < order.len() {
                forward(&mut ops, s, l);
            }
            ops.push(self.site_op(Kernel::CoupleBack, l, s, false));
            self.conv_backward(l, &mut ops);
            ops.push(self.site_op(Kernel::PassiveBar, l, s, false));
        }
        ops.push(Op {
            kernel: Kernel::Sum,
            words: super::coupling::sum_op_words(self.lay.n, self.lay.loss, spec.n_params()),
            groups: [1, 1],
        });
        ops
    }
}

/// The compiled kernels of one lattice flow.
struct Pipelines {
    mask: wgpu::ComputePipeline,
    gelu: wgpu::ComputePipeline,
    conv_forward: wgpu::ComputePipeline,
    conv_input_grad: wgpu::ComputePipeline,
    conv_weight_grad: wgpu::ComputePipeline,
    couple: wgpu::ComputePipeline,
    couple_back: wgpu::ComputePipeline,
    passive_bar: wgpu::ComputePipeline,
    loss: wgpu::ComputePipeline,
    sum: wgpu::ComputePipeline,
}

impl Pipelines {
    fn of(&self, kernel: Kernel) -> &wgpu::ComputePipeline {
        match kernel {
            Kernel::Mask => &self.mask,
            Kernel::Gelu => &self.gelu,
            Kernel::ConvForward => &self.conv_forward,
            Kernel::ConvInputGrad => &self.conv_input_grad,
            Kernel::ConvWeightGrad => &self.conv_weight_grad,
            Kernel::Couple => &self.couple,
            Kernel::CoupleBack => &self.couple_back,
            Kernel::PassiveBar => &self.passive_bar,
            Kernel::Loss => &self.loss,
            Kernel::Sum => &self.sum,
        }
    }
}

/// A recorded operation list with its work buffer, for `n` fields.
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
            pass.set_pipeline(pipelines.of(*kernel));
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], 1);
        }
    }
}

/// The bytes of the work buffer for `n` fields.
fn work_bytes(spec: &LatticeSpec, n: usize) -> u64 {
    Layout::new(spec, n).total as u64 * 4
}

/// The largest work buffer the device binds.
fn max_work_bytes(ctx: &GpuContext) -> u64 {
    let limits = ctx.device.limits();
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
}

/// Records `purpose`'s operations for `n` fields: settings, work buffer, bind groups.
fn build_plan(
    ctx: &GpuContext,
    pipelines: &Pipelines,
    spec: &LatticeSpec,
    n: usize,
    purpose: Purpose,
    [params, grad]: [&wgpu::Buffer; 2],
) -> Plan {
    let planner = Planner {
        spec,
        lay: Layout::new(spec, n),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let mut settings = vec![0u8; ops.len() * UNIFORM_STRIDE as usize];
    for (i, op) in ops.iter().enumerate() {
        let bytes: &[u8] = bytemuck::cast_slice(&op.words);
        let at = i * UNIFORM_STRIDE as usize;
        settings[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let uniforms = ctx.uniform("lattice operations", &settings);
    let work = ctx.storage("lattice work", &vec![0u8; planner.lay.total * 4], true);
    let binds = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let range = (
                &uniforms,
                i as u64 * UNIFORM_STRIDE,
                op.words.len() as u64 * 4,
            );
            let pipeline = pipelines.of(op.kernel);
            let bind = match op.kernel {
                // (a layout derived from a shader has only the bindings it uses)
                Kernel::ConvForward | Kernel::ConvInputGrad => {
                    ctx.bind_with_uniform_range(pipeline, range, &[(1, params), (2, &work)])
                }
                Kernel::ConvWeightGrad | Kernel::Sum => {
                    ctx.bind_with_uniform_range(pipeline, range, &[(2, &work), (3, grad)])
                }
                _ => ctx.bind_with_uniform_range(pipeline, range, &[(2, &work)]),
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

/// The shader of the per-site kernels, specialized for `spec` and `model`.
fn site_source(spec: &LatticeSpec, model: &Phi4) -> Result<String, String> {
    let n_raw = spec.stack.n_raw();
    let odd = match (spec.z2, spec.stack.odd_raw()) {
        (true, Some(mask)) => mask,
        (true, None) => return Err("this stack has no odd form for the Z2 design".into()),
        (false, _) => vec![false; n_raw],
    };
    let odd = odd
        .iter()
        .map(|&b| if b { "1u" } else { "0u" })
        .collect::<Vec<_>>()
        .join(", ");
    let c = model.couplings;
    let mut values = stack_values(&spec.stack)?;
    values.extend([
        ("COPIES", if spec.z2 { "2" } else { "1" }.to_string()),
        ("M2", format!("{:?}", c.m2 as f32)),
        ("LAMBDA", format!("{:?}", c.lambda as f32)),
        ("ODD", odd),
    ]);
    shader::compose("lattice_sites.wgsl", &values).map_err(|e| e.to_string())
}

/// A lattice coupling flow's training state on the GPU (reverse KL on phi^4).
pub struct GpuLatticeTrainer {
    opt: GpuOptimizer,
    ctx: GpuContext,
    flow: LatticeFlow<f64>,
    pipelines: Pipelines,
    train: Plan,
    display_plan: Option<Plan>,
}

impl GpuLatticeTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, String> {
        let FlowModel::Lattice(flow) = model else {
            return Err("the GPU lattice trainer takes a lattice flow".into());
        };
        let spec = flow.spec.clone();
        let Target::Phi4(theory) = target else {
            return Err(format!(
                "the GPU trains lattice flows on phi^4 targets, not '{}'",
                target.name()
            ));
        };
        if settings.loss != Loss::ReverseKl {
            return Err("lattice flows train by reverse KL (phi^4 has no sampler)".into());
        }
        if theory.size != spec.size {
            return Err(format!(
                "the flow is on a {0} x {0} lattice but the target on {1} x {1}",
                spec.size, theory.size
            ));
        }
        let max = max_work_bytes(&ctx);
        let need = work_bytes(&spec, settings.batch);
        if need > max {
            return Err(format!(
                "batch {} needs {} MB of activations on the GPU, more than this device allows ({} MB); use a smaller batch",
                settings.batch,
                need >> 20,
                max >> 20
            ));
        }
        let site = site_source(&spec, &theory)?;
        let conv = shader::compose("conv3x3.wgsl", &[]).map_err(|e| e.to_string())?;
        let sum = shader::compose("batch_sum.wgsl", &[]).map_err(|e| e.to_string())?;
        let pipelines = Pipelines {
            mask: ctx.pipeline_at("lattice mask", &site, "mask_main"),
            gelu: ctx.pipeline_at("lattice gelu", &conv, "gelu_main"),
            conv_forward: ctx.pipeline_at("lattice conv", &conv, "conv_forward_main"),
            conv_input_grad: ctx.pipeline_at(
                "lattice conv input grad",
                &conv,
                "conv_input_grad_main",
            ),
            conv_weight_grad: ctx.pipeline_at(
                "lattice conv weight grad",
                &conv,
                "conv_weight_grad_main",
            ),
            couple: ctx.pipeline_at("lattice stacks", &site, "couple_main"),
            couple_back: ctx.pipeline_at("lattice stacks backward", &site, "couple_back_main"),
            passive_bar: ctx.pipeline_at("lattice passive adjoints", &site, "passive_bar_main"),
            loss: ctx.pipeline_at("lattice loss", &site, "loss_main"),
            sum: ctx.pipeline_at("lattice sum", &sum, "sum_main"),
        };
        let batch = settings.batch;
        let opt = GpuOptimizer::new(&ctx, flow.params(), spec.volume(), target, settings)?;
        let train = build_plan(
            &ctx,
            &pipelines,
            &spec,
            batch,
            Purpose::Train,
            [&opt.params, &opt.total],
        );
        Ok(Self {
            opt,
            ctx,
            flow,
            pipelines,
            train,
            display_plan: None,
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

    /// `log q(phi)` of every field (n x V) with the current parameters.
    pub async fn log_q_async(&mut self, fields: &[f32]) -> Result<Vec<f32>, String> {
        self.display(Purpose::LogQ, fields).await
    }

    /// Latent fields (n x V) pushed through `x_from_z`: per field the
    /// configuration and `log |det dx/dz|` (n x (V + 1)).
    pub async fn x_from_z_async(&mut self, latent: &[f32]) -> Result<Vec<f32>, String> {
        self.display(Purpose::Push, latent).await
    }

    /// Runs a display plan for exactly these fields (rebuilt when the count
    /// or purpose changes) and reads its outputs back.
    async fn display(&mut self, purpose: Purpose, fields: &[f32]) -> Result<Vec<f32>, String> {
        let v = self.flow.spec.volume();
        let n = fields.len() / v;
        if n == 0 {
            return Ok(Vec::new());
        }
        if work_bytes(&self.flow.spec, n) > max_work_bytes(&self.ctx) {
            return Err(format!("{n} fields do not fit the GPU at once"));
        }
        if self
            .display_plan
            .as_ref()
            .is_none_or(|p| p.lay.n != n || p.purpose != purpose)
        {
            self.display_plan = Some(build_plan(
                &self.ctx,
                &self.pipelines,
                &self.flow.spec,
                n,
                purpose,
                [&self.opt.params, &self.opt.total],
            ));
        }
        let Some(plan) = self.display_plan.as_ref() else {
            unreachable!("built above")
        };
        self.upload(plan, &fields[..n * v]);
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        plan.encode(&self.pipelines, &mut encoder);
        self.ctx.queue.submit([encoder.finish()]);
        let width = if purpose == Purpose::LogQ { 1 } else { v + 1 };
        let bytes = self
            .ctx
            .read_back_async(
                &plan.work,
                plan.lay.display as u64 * 4,
                (n * width * 4) as u64,
            )
            .await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&bytes).to_vec())
    }
}

impl FlowKernels for GpuLatticeTrainer {
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
            .and_then(|p| LatticeFlow::from_params(self.flow.spec.clone(), p).ok())
            .unwrap_or_else(|| self.flow.clone());
        FlowModel::Lattice(flow)
    }

    fn accept_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        let FlowModel::Lattice(f) = model else {
            return Err("the GPU trainer holds a lattice flow".into());
        };
        if f.spec != self.flow.spec {
            return Err("the new model has a different structure".into());
        }
        self.flow = f.clone();
        Ok(())
    }
}
