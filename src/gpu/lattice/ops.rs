//! The operation list of a lattice coupling flow on the GPU: where every
//! array sits in the work buffer ([`Layout`]), and the dispatches of a
//! training step or a display pass ([`Planner`]), recorded as a [`Plan`].

use crate::flow::LatticeSpec;
use crate::gpu::GpuContext;
use crate::gpu::plan::{self, Op, Pipelines, Plan, Purpose};

/// The most workgroups along one dimension of a dispatch.
const MAX_GROUPS: usize = 65_535;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kernel {
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

impl plan::Kernel for Kernel {
    fn binds_params(self) -> bool {
        matches!(self, Kernel::ConvForward | Kernel::ConvInputGrad)
    }

    fn binds_grad(self) -> bool {
        matches!(self, Kernel::ConvWeightGrad | Kernel::Sum)
    }
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

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` fields.
pub(super) struct Layout {
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
    pub(super) display: usize,
    total: usize,
}

impl Layout {
    pub(super) fn new(spec: &LatticeSpec, n: usize) -> Self {
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
    fn conv(&self, kernel: Kernel, c: ConvOp) -> Op<Kernel> {
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
    fn conv_forward(&self, l: usize, ops: &mut Vec<Op<Kernel>>) {
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
    fn conv_backward(&self, l: usize, ops: &mut Vec<Op<Kernel>>) {
        let (spec, lay) = (self.spec, &self.lay);
        let (w, depth) = (spec.width, spec.depth);
        let both = |ops: &mut Vec<Op<Kernel>>, c: ConvOp| {
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
    fn site_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op<Kernel> {
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

    fn ops(&self, purpose: Purpose) -> Vec<Op<Kernel>> {
        let spec = self.spec;
        let z_from_x = purpose == Purpose::LogQ;
        let order: Vec<usize> = if z_from_x {
            (0..spec.layers).rev().collect()
        } else {
            (0..spec.layers).collect()
        };
        let mut ops = Vec::new();
        let forward = |ops: &mut Vec<Op<Kernel>>, s: usize, l: usize| {
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
            Purpose::Train(_) => 1,
            Purpose::LogQ => 2,
            Purpose::Push => 3,
        };
        ops.push(loss);
        if !matches!(purpose, Purpose::Train(_)) {
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
            words: plan::batch_sum_words(self.lay.n, self.lay.loss, spec.n_params()),
            groups: [1, 1],
        });
        ops
    }
}

/// The bytes of the work buffer for `n` fields.
pub(super) fn work_bytes(spec: &LatticeSpec, n: usize) -> u64 {
    Layout::new(spec, n).total as u64 * 4
}

/// Records `purpose`'s operations for `n` fields: settings, work buffer, bind groups.
pub(super) fn build_plan(
    ctx: &GpuContext,
    pipelines: &Pipelines<Kernel>,
    spec: &LatticeSpec,
    n: usize,
    purpose: Purpose,
    buffers: [&wgpu::Buffer; 2],
) -> Plan<Kernel> {
    let planner = Planner {
        spec,
        lay: Layout::new(spec, n),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let sizes = (purpose, n, planner.lay.total);
    Plan::record(ctx, "lattice", pipelines, ops, sizes, buffers)
}
