//! The operation list of a coupling flow on the GPU: where every array sits in
//! the work buffer ([`Layout`]), and the dispatches of a training step or a
//! display pass ([`Planner`]), recorded as a [`Plan`].

use crate::flow::CouplingSpec;
use crate::gpu::GpuContext;
use crate::gpu::plan::{self, Op, Pipelines, Plan, Purpose};
use crate::train::Loss;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kernel {
    Matmul,
    Couple,
    CoupleBack,
    Loss,
    Sum,
}

impl plan::Kernel for Kernel {
    fn binds_params(self) -> bool {
        self == Kernel::Matmul
    }

    fn binds_grad(self) -> bool {
        matches!(self, Kernel::Matmul | Kernel::Sum)
    }
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
fn matmul(
    dims: [usize; 3],
    flags: u32,
    a: Operand,
    b: Operand,
    c: Operand,
    rh: [u32; 2],
) -> Op<Kernel> {
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

fn sum_op(n: usize, loss: usize, n_grad: usize) -> Op<Kernel> {
    Op {
        kernel: Kernel::Sum,
        words: plan::batch_sum_words(n, loss, n_grad),
        groups: [1, 1],
    }
}

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` points.
pub(super) struct Layout {
    n: usize,
    ld: usize,
    hidden: usize,
    raw: usize,
    raw_bar: usize,
    h_bar: [usize; 2],
    bar: usize,
    loss: usize,
    pub(super) out: usize,
    pub(super) total: usize,
}

impl Layout {
    pub(super) fn new(spec: &CouplingSpec, n_out: usize, n: usize) -> Self {
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
    fn mlp_forward(&self, l: usize, s: usize, ops: &mut Vec<Op<Kernel>>) {
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
    fn mlp_backward(&self, l: usize, s: usize, ops: &mut Vec<Op<Kernel>>) {
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
    fn couple_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op<Kernel> {
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
    fn loss_op(&self, mode: u32) -> Op<Kernel> {
        let (spec, lay, u) = (self.spec, &self.lay, Self::u);
        let mut op = self.couple_op(Kernel::Loss, 0, spec.layers, true);
        op.words[1] = u(lay.snap(spec, spec.layers));
        op.words[11] = mode;
        op
    }

    fn ops(&self, purpose: Purpose) -> Vec<Op<Kernel>> {
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

/// The bytes of the work buffer for `n` points.
pub(super) fn work_bytes(spec: &CouplingSpec, n: usize) -> u64 {
    Layout::new(spec, max_out(spec), n).total as u64 * 4
}

pub(super) fn max_out(spec: &CouplingSpec) -> usize {
    (0..spec.layers.min(2))
        .map(|l| spec.mlp(l).n_out)
        .max()
        .unwrap_or(0)
}

/// Records `purpose`'s operations for `n` points: settings, work buffer, bind groups.
pub(super) fn build_plan(
    ctx: &GpuContext,
    pipelines: &Pipelines<Kernel>,
    spec: &CouplingSpec,
    n: usize,
    purpose: Purpose,
    buffers: [&wgpu::Buffer; 2],
) -> Plan<Kernel> {
    let planner = Planner {
        spec,
        n_out: max_out(spec),
        lay: Layout::new(spec, max_out(spec), n),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let sizes = (purpose, n, planner.lay.total);
    Plan::record(ctx, "coupling", pipelines, ops, sizes, buffers)
}
