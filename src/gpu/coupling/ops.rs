//! The operation list of a coupling flow on the GPU: where every array sits in
//! the work buffer ([`Layout`]), and the dispatches of a training step or a
//! display pass ([`Planner`]), recorded as a [`Plan`]. Every layer is one
//! dispatch forward (`coupling_layer.wgsl`: the conditioner and the stacks for
//! a tile of samples) and two backward (the same again with the reverse modes,
//! then the weight gradients' sums over the batch).

use crate::flow::CouplingSpec;
use crate::gpu::GpuContext;
use crate::gpu::plan::{self, Op, Pipelines, Plan, Purpose, grid};
use crate::train::Loss;

/// Samples a workgroup of the layer kernels takes through a layer.
pub(super) const TILE: usize = 8;
/// Threads a workgroup (the WGSL's `@workgroup_size`).
const THREADS: usize = 64;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kernel {
    LayerForward,
    LayerBackward,
    WeightGrad,
    Loss,
    Sum,
}

impl plan::Kernel for Kernel {
    fn binds_params(self) -> bool {
        matches!(self, Kernel::LayerForward | Kernel::LayerBackward)
    }

    fn binds_grad(self) -> bool {
        matches!(self, Kernel::WeightGrad | Kernel::Sum)
    }
}

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` points.
/// Display plans have no adjoints.
pub(super) struct Layout {
    n: usize,
    ld: usize,
    hidden: usize,
    acts: usize,
    raw: usize,
    raw_bar: usize,
    h_bar: usize,
    bar: usize,
    loss: usize,
    pub(super) out: usize,
    pub(super) total: usize,
}

impl Layout {
    pub(super) fn new(spec: &CouplingSpec, n_out: usize, n: usize, purpose: Purpose) -> Self {
        let (d, w, depth) = (spec.dim, spec.width, spec.depth);
        let training = matches!(purpose, Purpose::Train(_));
        let adjoint = |size: usize| if training { size } else { 0 };
        let ld = (spec.layers + 1) * n * d;
        let hidden = ld + n;
        let acts = hidden + (depth + 1) * n * w;
        let raw = acts + depth * n * w;
        let raw_bar = raw + n * n_out;
        let h_bar = raw_bar + adjoint(n * n_out);
        let bar = h_bar + adjoint((depth + 1) * n * w);
        let loss = bar + adjoint(n * d);
        let out = loss + adjoint(n);
        Self {
            n,
            ld,
            hidden,
            acts,
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
}

/// Builds the operation lists of one coupling flow.
struct Planner<'a> {
    spec: &'a CouplingSpec,
    lay: Layout,
    inv_n: f32,
}

impl Planner<'_> {
    /// coupling_layer.wgsl's settings for layer `l` applied as the `s`-th layer.
    fn layer_words(&self, l: usize, s: usize, z_from_x: bool) -> Vec<u32> {
        let (spec, lay) = (self.spec, &self.lay);
        let u = |v: usize| v as u32;
        let (active, passive) = spec.split(l);
        vec![
            u(lay.n),
            u(lay.snap(spec, s)),
            u(lay.snap(spec, s + 1)),
            u(lay.ld),
            u(lay.bar),
            u(lay.raw),
            u(lay.raw_bar),
            u(active[0]),
            u(active.len()),
            u(passive[0]),
            u(passive.len()),
            u32::from(!z_from_x),
            u32::from(s == 0),
            self.inv_n.to_bits(),
            u(spec.layer_offset(l)),
            u(lay.hidden),
            u(lay.acts),
            u(lay.h_bar),
            0,
            u(lay.loss),
            u(lay.out),
            u(lay.snap(spec, 0)),
            0,
            0,
        ]
    }

    fn layer_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op<Kernel> {
        let groups = match kernel {
            Kernel::WeightGrad => grid(self.spec.mlp(l).n_params().div_ceil(THREADS)),
            _ => grid(self.lay.n.div_ceil(TILE)),
        };
        Op {
            kernel,
            words: self.layer_words(l, s, z_from_x),
            groups,
        }
    }

    /// The last operation: the loss (mode 0 forward KL, 1 reverse KL) or a
    /// display output (2 log q, 3 x and log det) from the final snapshot.
    fn loss_op(&self, mode: u32) -> Op<Kernel> {
        let (spec, lay) = (self.spec, &self.lay);
        let mut words = self.layer_words(0, spec.layers, true);
        words[1] = lay.snap(spec, spec.layers) as u32;
        words[18] = mode;
        Op {
            kernel: Kernel::Loss,
            words,
            groups: [lay.n.div_ceil(THREADS) as u32, 1],
        }
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
            ops.push(self.layer_op(Kernel::LayerForward, l, s, z_from_x));
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
            ops.push(self.layer_op(Kernel::LayerBackward, l, s, z_from_x));
            ops.push(self.layer_op(Kernel::WeightGrad, l, s, z_from_x));
        }
        ops.push(Op {
            kernel: Kernel::Sum,
            words: plan::batch_sum_words(self.lay.n, self.lay.loss, spec.n_params()),
            groups: [1, 1],
        });
        ops
    }
}

/// The bytes of the work buffer of a `purpose` plan for `n` points.
pub(super) fn work_bytes(spec: &CouplingSpec, n: usize, purpose: Purpose) -> u64 {
    Layout::new(spec, max_out(spec), n, purpose).total as u64 * 4
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
        lay: Layout::new(spec, max_out(spec), n, purpose),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let sizes = (purpose, n, planner.lay.total);
    Plan::record(ctx, "coupling", pipelines, ops, sizes, buffers)
}
