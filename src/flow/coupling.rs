//! Coupling flows (docs/mathematics.md, section 5.1): checker masks, a ResNet MLP conditioner on
//! the passive coordinates, and a scalar stack (one family, or K copies) on each
//! active coordinate. Layer `l` is active where `(i + parity_l) mod 2 = 1`, with
//! parity 1 for the first layer (even coordinates active, as bijx) and flipping.
//!
//! The sampling direction applies layers 0, 1, ..., L-1; the density direction
//! their inverses in reverse order. Parameter layout: each layer's MLP
//! parameters in turn ([`MlpShape`]); the conditioner's output is split per
//! active element first, then that element's stack raw values.

use super::FlowError;
use super::layers::{CouplingLayers, Direction, flow_through_layers};
use super::nn::mlp::{MlpCache, MlpShape};
use crate::bijection::lanes::{LANES, PackedStack, add_lane_major, to_lane_inner, to_lane_major};
use crate::bijection::{Family, Stack};
use crate::real::Real;
use crate::rng::Rng;
use ndarray::Array2;

/// The structure of a coupling flow.
#[derive(Clone, Debug, PartialEq)]
pub struct CouplingSpec {
    pub dim: usize,
    pub layers: usize,
    pub width: usize,
    pub depth: usize,
    /// The transform of each active coordinate.
    pub stack: Stack,
}

impl CouplingSpec {
    /// Active and passive coordinate indices of layer `l`.
    pub fn split(&self, l: usize) -> (Vec<usize>, Vec<usize>) {
        let parity = if l.is_multiple_of(2) { 1 } else { 0 };
        (0..self.dim).partition(|i| (i + parity) % 2 == 1)
    }

    pub fn mlp(&self, l: usize) -> MlpShape {
        let (active, passive) = self.split(l);
        MlpShape {
            n_in: passive.len(),
            width: self.width,
            depth: self.depth,
            n_out: active.len() * self.stack.n_raw(),
        }
    }

    pub fn n_params(&self) -> usize {
        (0..self.layers).map(|l| self.mlp(l).n_params()).sum()
    }

    pub fn validate(&self) -> Result<(), FlowError> {
        use super::limits::{MAX_DEPTH, MAX_DIM, MAX_LAYERS, MAX_PARAMS, MAX_WIDTH};
        let flow = "coupling";
        if !(2..=MAX_DIM).contains(&self.dim) {
            return Err(FlowError::Dimension { flow, min: 2 });
        }
        if !(1..=MAX_LAYERS).contains(&self.layers)
            || !(1..=MAX_WIDTH).contains(&self.width)
            || self.depth > MAX_DEPTH
        {
            return Err(FlowError::CouplingShape);
        }
        if self.stack.is_empty() {
            return Err(FlowError::EmptyStack { flow });
        }
        // Within the bounds above this cannot overflow (all factors < 2^26).
        let n = self.n_params();
        if n > MAX_PARAMS {
            return Err(FlowError::TooManyParams(n));
        }
        Ok(())
    }

    /// Where layer `l`'s parameters start in the flow's parameter vector.
    pub fn layer_offset(&self, l: usize) -> usize {
        (0..l).map(|k| self.mlp(k).n_params()).sum()
    }
}

#[derive(Clone, Debug)]
pub struct CouplingFlow<T> {
    pub spec: CouplingSpec,
    params: Vec<T>,
}

/// What one layer's forward pass keeps for its backward pass.
pub(super) struct LayerCache<T> {
    mlp: MlpCache<T>,
    raw: Array2<T>,
    active: ActiveTrace<T>,
}

/// What transforming a layer's active elements keeps for the backward pass.
pub(super) struct ActiveTrace<T> {
    /// stack traces, (n * n_active) x K
    traces: Vec<T>,
    /// each active element's value on the x side of its stack (the output in
    /// the sampling direction, the input in the density direction)
    x_side: Vec<T>,
}

/// Active element `e` (sample `e / n_active`'s coordinate `active[e % n_active]`):
/// its sample and its index in the n x d array.
fn element_slot(e: usize, active: &[usize], d: usize) -> (usize, usize) {
    let sample = e / active.len();
    (sample, sample * d + active[e % active.len()])
}

/// Applies the stack to the active elements of every sample of `cur` (n x d,
/// in place) in `dir`, element `a` of sample `i` with the raw values
/// `raw[(i * n_active + a) * p ..][..p]`, adding log-dets into `log_det`.
pub(super) fn transform_active<T: Real>(
    stack: &Stack,
    dir: Direction,
    active: &[usize],
    raw: &[T],
    cur: &mut [T],
    log_det: &mut [T],
) -> ActiveTrace<T> {
    let n = log_det.len();
    let d = cur.len() / n.max(1);
    let (k, p) = (stack.len(), stack.n_raw());
    let count = n * active.len();
    let mut traces = vec![T::zero(); count * k];
    let mut x_side = vec![T::zero(); count];
    let mut built = Vec::with_capacity(k);
    let mut packed = PackedStack::new();
    // a group's raw values and traces as the packed stack takes them (lane-inner)
    let (mut raw_inner, mut trace_inner) = (vec![T::zero(); p * LANES], vec![T::zero(); k * LANES]);
    let at = |e: usize| element_slot(e, active, d);
    // elements in groups of LANES: packed where the family allows, else one by one
    for start in (0..count).step_by(LANES) {
        let m = LANES.min(count - start);
        let group = start..start + m;
        to_lane_inner(&raw[start * p..(start + m) * p], m, p, &mut raw_inner);
        if packed.build(stack, &raw_inner, m) {
            let mut v = [T::zero(); LANES];
            let mut logd = [T::zero(); LANES];
            for (j, e) in group.clone().enumerate() {
                v[j] = cur[at(e).1];
            }
            let trace = &mut trace_inner;
            match dir {
                Direction::XFromZ => packed.x_from_z(&mut v[..m], &mut logd[..m], trace),
                Direction::ZFromX => packed.z_from_x(&mut v[..m], &mut logd[..m], trace),
            }
            to_lane_major(trace, m, k, &mut traces[start * k..(start + m) * k]);
            for (j, e) in group.enumerate() {
                let (i, slot) = at(e);
                let input = cur[slot];
                cur[slot] = v[j];
                x_side[e] = if dir == Direction::XFromZ {
                    v[j]
                } else {
                    input
                };
                log_det[i] += if dir == Direction::XFromZ {
                    logd[j]
                } else {
                    -logd[j]
                };
            }
            continue;
        }
        for e in group {
            let (i, slot) = at(e);
            stack.build(&raw[e * p..(e + 1) * p], &mut built);
            let trace = &mut traces[e * k..(e + 1) * k];
            let v = cur[slot];
            let (out, logd) = match dir {
                Direction::XFromZ => Stack::x_from_z_trace(&built, v, trace),
                Direction::ZFromX => Stack::z_from_x_trace(&built, v, trace),
            };
            cur[slot] = out;
            x_side[e] = if dir == Direction::XFromZ { out } else { v };
            log_det[i] += if dir == Direction::XFromZ {
                logd
            } else {
                -logd
            };
        }
    }
    ActiveTrace { traces, x_side }
}

/// Backward through [`transform_active`]: turns the active elements' output
/// adjoints in `bar` (n x d) into input adjoints and writes the raw values'
/// adjoints into `raw_bar` (laid out as `raw`).
#[allow(clippy::too_many_arguments)]
pub(super) fn transform_active_backward<T: Real>(
    stack: &Stack,
    dir: Direction,
    active: &[usize],
    raw: &[T],
    trace: &ActiveTrace<T>,
    bar: &mut [T],
    ld_bar: &[T],
    raw_bar: &mut [T],
) {
    let n = ld_bar.len();
    let d = bar.len() / n.max(1);
    let (k, p) = (stack.len(), stack.n_raw());
    let count = n * active.len();
    let mut built = Vec::with_capacity(k);
    let mut packed = PackedStack::new();
    // a group's raw values, traces and raw adjoints lane-inner
    let mut raw_inner = vec![T::zero(); p * LANES];
    let mut trace_inner = vec![T::zero(); k * LANES];
    let mut bar_inner = vec![T::zero(); p * LANES];
    let at = |e: usize| element_slot(e, active, d);
    for start in (0..count).step_by(LANES) {
        let m = LANES.min(count - start);
        let group = start..start + m;
        to_lane_inner(&raw[start * p..(start + m) * p], m, p, &mut raw_inner);
        if packed.build(stack, &raw_inner, m) {
            let mut b = [T::zero(); LANES];
            let mut lb = [T::zero(); LANES];
            for (j, e) in group.clone().enumerate() {
                let (i, slot) = at(e);
                b[j] = bar[slot];
                lb[j] = ld_bar[i];
            }
            to_lane_inner(
                &trace.traces[start * k..(start + m) * k],
                m,
                k,
                &mut trace_inner,
            );
            let x_side = &trace.x_side[group.clone()];
            let (tr, g) = (&trace_inner, &mut bar_inner);
            g.fill(T::zero());
            match dir {
                Direction::XFromZ => packed.x_from_z_backward(tr, x_side, &mut b[..m], &lb[..m], g),
                Direction::ZFromX => packed.z_from_x_backward(tr, x_side, &mut b[..m], &lb[..m], g),
            }
            add_lane_major(g, m, p, &mut raw_bar[start * p..(start + m) * p]);
            for (j, e) in group.enumerate() {
                bar[at(e).1] = b[j];
            }
            continue;
        }
        for e in group {
            let (i, slot) = at(e);
            stack.build(&raw[e * p..(e + 1) * p], &mut built);
            let tr = &trace.traces[e * k..(e + 1) * k];
            let g = &mut raw_bar[e * p..(e + 1) * p];
            let b = bar[slot];
            bar[slot] = match dir {
                Direction::XFromZ => {
                    stack.x_from_z_backward(&built, tr, trace.x_side[e], b, ld_bar[i], g)
                }
                Direction::ZFromX => {
                    stack.z_from_x_backward(&built, tr, trace.x_side[e], b, ld_bar[i], g)
                }
            };
        }
    }
}

impl<T: Real> CouplingFlow<T> {
    /// bijx's `extract_init`: output kernel N(0, 1e-3^2), output bias = one draw
    /// of the stack's default raw values tiled over the active elements. Affine
    /// layers (RealNVP) start exactly at the identity.
    pub fn init(spec: CouplingSpec, rng: &mut Rng) -> Result<Self, FlowError> {
        spec.validate()?;
        let affine = spec.stack.layers().iter().all(|f| *f == Family::Affine);
        let mut params = Vec::with_capacity(spec.n_params());
        for l in 0..spec.layers {
            let shape = spec.mlp(l);
            let base = spec.stack.default_raw(&mut || rng.normal());
            let n_active = spec.split(l).0.len();
            let bias: Vec<f64> = (0..n_active).flat_map(|_| base.iter().copied()).collect();
            let out_std = if affine { 0.0 } else { 1e-3 };
            params.extend(shape.init(out_std, &bias, rng));
        }
        Ok(Self {
            spec,
            params: params.into_iter().map(T::c).collect(),
        })
    }

    pub fn from_params(spec: CouplingSpec, params: Vec<T>) -> Result<Self, FlowError> {
        spec.validate()?;
        if params.len() != spec.n_params() {
            return Err(FlowError::ParamCount {
                flow: "coupling",
                expected: spec.n_params(),
                got: params.len(),
            });
        }
        Ok(Self { spec, params })
    }

    fn layer_params(&self, l: usize) -> &[T] {
        let off = self.spec.layer_offset(l);
        &self.params[off..off + self.spec.mlp(l).n_params()]
    }
}

impl<T: Real> CouplingLayers<T> for CouplingFlow<T> {
    type Cache = LayerCache<T>;

    fn dim(&self) -> usize {
        self.spec.dim
    }

    fn params(&self) -> &[T] {
        &self.params
    }

    fn params_mut(&mut self) -> &mut [T] {
        &mut self.params
    }

    fn n_layers(&self) -> usize {
        self.spec.layers
    }

    fn layer_forward(
        &self,
        l: usize,
        dir: Direction,
        cur: &mut [T],
        log_det: &mut [T],
    ) -> LayerCache<T> {
        let d = self.spec.dim;
        let n = log_det.len();
        let (active, passive) = self.spec.split(l);
        let input = Array2::from_shape_fn((n, passive.len()), |(i, j)| cur[i * d + passive[j]]);
        let (raw, mlp) = self.spec.mlp(l).forward(self.layer_params(l), input);
        let raw_flat = raw
            .as_slice()
            .unwrap_or_else(|| unreachable!("standard layout"));
        let active_trace = transform_active(&self.spec.stack, dir, &active, raw_flat, cur, log_det);
        LayerCache {
            mlp,
            raw,
            active: active_trace,
        }
    }

    fn layer_backward(
        &self,
        l: usize,
        dir: Direction,
        cache: &LayerCache<T>,
        bar: &mut [T],
        ld_bar: &[T],
        grad: &mut [T],
    ) {
        let d = self.spec.dim;
        let n = ld_bar.len();
        let (active, passive) = self.spec.split(l);
        let p = self.spec.stack.n_raw();
        let mut raw_bar = Array2::<T>::zeros((n, active.len() * p));
        transform_active_backward(
            &self.spec.stack,
            dir,
            &active,
            cache
                .raw
                .as_slice()
                .unwrap_or_else(|| unreachable!("standard layout")),
            &cache.active,
            bar,
            ld_bar,
            raw_bar
                .as_slice_mut()
                .unwrap_or_else(|| unreachable!("standard layout")),
        );
        let off = self.spec.layer_offset(l);
        let shape = self.spec.mlp(l);
        let in_bar = shape.backward(
            self.layer_params(l),
            &cache.mlp,
            raw_bar.view(),
            &mut grad[off..off + shape.n_params()],
        );
        for i in 0..n {
            for (j, &idx) in passive.iter().enumerate() {
                bar[i * d + idx] += in_bar[(i, j)];
            }
        }
    }
}

flow_through_layers!(CouplingFlow);
