//! The operation list of a lattice coupling flow on the GPU: where every
//! array sits in the work buffer ([`Layout`]), and the dispatches of a
//! training step or a display pass ([`Planner`]), recorded as a [`Plan`].
//! Every layer is one dispatch forward (`lattice_layer.wgsl`: the conditioner
//! and the stacks, a workgroup a field) and two backward (the same again with
//! the reverse modes, then the weight gradients' sums over the batch).

use crate::flow::LatticeSpec;
use crate::gpu::GpuContext;
use crate::gpu::plan::{self, Op, Pipelines, Plan, Purpose, grid};

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

/// Offsets (in floats) of the arrays in a plan's work buffer, for `n` fields.
/// Display plans have no adjoints.
pub(super) struct Layout {
    n: usize,
    /// sites
    v: usize,
    ld: usize,
    input: usize,
    hidden: usize,
    /// gelu of hidden states 0 .. depth - 1
    acts: usize,
    out: usize,
    out_bar: usize,
    h_bar: usize,
    bar: usize,
    loss: usize,
    pub(super) display: usize,
    total: usize,
}

impl Layout {
    pub(super) fn new(spec: &LatticeSpec, n: usize, purpose: Purpose) -> Self {
        let v = spec.volume();
        let copies = if spec.z2 { 2 } else { 1 };
        let training = matches!(purpose, Purpose::Train(_));
        let adjoint = |size: usize| if training { size } else { 0 };
        // conditioner rows: copies x n x V
        let rows = copies * n * v;
        let (w, p) = (spec.width, spec.stack.n_raw());
        let ld = (spec.layers + 1) * n * v;
        let input = ld + n * v;
        let hidden = input + rows;
        let acts = hidden + (spec.depth + 1) * rows * w;
        let out = acts + spec.depth * rows * w;
        let out_bar = out + rows * p;
        let h_bar = out_bar + adjoint(rows * p);
        let bar = h_bar + adjoint((spec.depth + 1) * rows * w);
        let loss = bar + adjoint(n * v);
        let display = loss + adjoint(n);
        Self {
            n,
            v,
            ld,
            input,
            hidden,
            acts,
            out,
            out_bar,
            h_bar,
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
}

/// Builds the operation lists of one lattice flow.
struct Planner<'a> {
    spec: &'a LatticeSpec,
    lay: Layout,
    inv_n: f32,
}

impl Planner<'_> {
    /// lattice_layer.wgsl's settings for layer `l` applied as the `s`-th layer.
    fn layer_words(&self, l: usize, s: usize, z_from_x: bool) -> Vec<u32> {
        let (spec, lay) = (self.spec, &self.lay);
        let u = |v: usize| v as u32;
        vec![
            u(lay.n),
            u(spec.size),
            u32::from(l.is_multiple_of(2)),
            u32::from(!z_from_x),
            u(lay.snap(s)),
            u(lay.snap(s + 1)),
            u(lay.input),
            u(lay.out),
            u(lay.out_bar),
            u(l * spec.conv().n_params()),
            u(lay.ld),
            u32::from(s == 0),
            u(lay.bar),
            self.inv_n.to_bits(),
            0,
            u(lay.loss),
            u(lay.display),
            u(lay.snap(0)),
            u(lay.hidden),
            u(lay.acts),
            u(lay.h_bar),
            0,
            0,
            0,
        ]
    }

    fn layer_op(&self, kernel: Kernel, l: usize, s: usize, z_from_x: bool) -> Op<Kernel> {
        let groups = match kernel {
            // a workgroup a parameter entry of the layer
            Kernel::WeightGrad => grid(self.spec.conv().n_params()),
            // a workgroup a field
            _ => grid(self.lay.n),
        };
        Op {
            kernel,
            words: self.layer_words(l, s, z_from_x),
            groups,
        }
    }

    /// The last operation: the loss (mode 1, reverse KL) or a display output
    /// (2 log q, 3 x and log det) from the final snapshot.
    fn loss_op(&self, mode: u32) -> Op<Kernel> {
        let mut words = self.layer_words(0, self.spec.layers, true);
        words[4] = self.lay.snap(self.spec.layers) as u32;
        words[14] = mode;
        Op {
            kernel: Kernel::Loss,
            words,
            groups: [self.lay.n.div_ceil(64) as u32, 1],
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
        for (s, &l) in order.iter().enumerate() {
            ops.push(self.layer_op(Kernel::LayerForward, l, s, z_from_x));
        }
        let mode = match purpose {
            Purpose::Train(_) => 1,
            Purpose::LogQ => 2,
            Purpose::Push => 3,
        };
        ops.push(self.loss_op(mode));
        if !matches!(purpose, Purpose::Train(_)) {
            return ops;
        }
        for (s, &l) in order.iter().enumerate().rev() {
            ops.push(self.layer_op(Kernel::LayerBackward, l, s, false));
            ops.push(self.layer_op(Kernel::WeightGrad, l, s, false));
        }
        ops.push(Op {
            kernel: Kernel::Sum,
            words: plan::batch_sum_words(self.lay.n, self.lay.loss, spec.n_params()),
            groups: [1, 1],
        });
        ops
    }
}

/// The bytes of the work buffer of a `purpose` plan for `n` fields.
pub(super) fn work_bytes(spec: &LatticeSpec, n: usize, purpose: Purpose) -> u64 {
    Layout::new(spec, n, purpose).total as u64 * 4
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
        lay: Layout::new(spec, n, purpose),
        inv_n: 1.0 / n as f32,
    };
    let ops = planner.ops(purpose);
    let sizes = (purpose, n, planner.lay.total);
    Plan::record(ctx, "lattice", pipelines, ops, sizes, buffers)
}
