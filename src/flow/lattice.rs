//! Coupling flows on the periodic L x L lattice (docs/mathematics.md, section 8): checkerboard
//! masks and a convolutional conditioner ([`super::nn::conv`]), with a scalar stack
//! on each active site. Layer `l` is active on the sites `(x + y + parity_l)`
//! odd, parity 1 for the first layer and flipping, so two layers update every
//! site once.
//!
//! The conditioner sees the whole field with the active sites zeroed and gives
//! each site its stack's raw values. In the Z2-equivariant design (`z2`) it is
//! run on the field and on its negation, `N(+phi)` and `N(-phi)`: the stack's
//! shift-like raw values (those [`crate::bijection::Family::odd_raw`] marks)
//! take the odd part `(N(+phi) - N(-phi)) / 2`, all others the even part
//! `(N(+phi) + N(-phi)) / 2`. Each site's map is then an odd function of the
//! whole field, so the flow commutes with `phi -> -phi` and its density is
//! symmetric whatever the training does: it cannot collapse onto one sign of
//! the magnetization.
//!
//! Fields are rows of `n x V` arrays, site `s = y * L + x`. Parameter layout:
//! each layer's [`ConvShape`] parameters in turn.

use super::FlowError;
use super::coupling::{ActiveTrace, transform_active, transform_active_backward};
use super::layers::{CouplingLayers, Direction, flow_through_layers};
use super::nn::Activation;
use super::nn::conv::{ConvCache, ConvShape, MAX_KERNEL};
use crate::bijection::{Family, Stack};
use crate::real::Real;
use crate::rng::Rng;
use ndarray::Array2;

/// Largest lattice side a lattice flow takes.
pub const MAX_SIZE: usize = 64;
/// Largest number of channels of the convolutional conditioner.
pub const MAX_CHANNELS: usize = 256;

/// The conditioner's design beyond its width and depth: what the phi^4
/// literature varies (kernel side, activation, plain channel lists, a bounded
/// output head).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvDesign {
    /// Kernel side (odd, 1 to 7).
    pub kernel: usize,
    pub activation: Activation,
    /// Plain (not residual) hidden layers of these channels, e.g. `[8, 8]`
    /// for the tutorials' 1 -> 8 -> 8 -> out; `None`: the residual
    /// conditioner of `width` channels and `depth` blocks.
    pub channels: Option<Vec<usize>>,
    /// `B` of the bounded head `B tanh(out / B)`; 0 for the identity head.
    pub head_bound: f64,
}

impl Default for ConvDesign {
    /// The residual 3 x 3 GELU conditioner with an identity head (what the GPU
    /// trainer runs).
    fn default() -> Self {
        Self {
            kernel: 3,
            activation: Activation::Gelu,
            channels: None,
            head_bound: 0.0,
        }
    }
}

/// Largest bound of the bounded head.
pub const MAX_HEAD_BOUND: f64 = 100.0;

/// The structure of a lattice coupling flow.
#[derive(Clone, Debug, PartialEq)]
pub struct LatticeSpec {
    /// Lattice side L (even, so the checkerboard is consistent across the boundary).
    pub size: usize,
    pub layers: usize,
    /// Channels of the conditioner.
    pub width: usize,
    /// Residual blocks of the conditioner.
    pub depth: usize,
    /// The transform of each active site.
    pub stack: Stack,
    /// Whether the flow is Z2-equivariant (even/odd conditioner, odd site maps).
    pub z2: bool,
    /// Kernel, activation, channel list and head of the conditioner.
    pub conv: ConvDesign,
}

impl LatticeSpec {
    pub fn volume(&self) -> usize {
        self.size * self.size
    }

    /// Active and passive sites of layer `l`.
    pub fn split(&self, l: usize) -> (Vec<usize>, Vec<usize>) {
        let parity = if l.is_multiple_of(2) { 1 } else { 0 };
        let size = self.size;
        (0..self.volume()).partition(|s| (s / size + s % size + parity) % 2 == 1)
    }

    pub fn conv(&self) -> ConvShape {
        let (hidden, residual) = match &self.conv.channels {
            Some(list) => (list.clone(), false),
            None => (vec![self.width; self.depth + 1], true),
        };
        ConvShape {
            size: self.size,
            c_in: 1,
            hidden,
            c_out: self.stack.n_raw(),
            residual,
            kernel: self.conv.kernel,
            activation: self.conv.activation,
            head_bound: self.conv.head_bound,
        }
    }

    pub fn n_params(&self) -> usize {
        self.layers * self.conv().n_params()
    }

    pub fn validate(&self) -> Result<(), FlowError> {
        use super::limits::{MAX_DEPTH, MAX_LAYERS};
        if !(2..=MAX_SIZE).contains(&self.size) || !self.size.is_multiple_of(2) {
            return Err(FlowError::LatticeSide {
                max: MAX_SIZE,
                got: self.size,
            });
        }
        let channels = self.conv.channels.as_deref().unwrap_or(&[]);
        if !(1..=MAX_LAYERS).contains(&self.layers)
            || !(1..=MAX_CHANNELS).contains(&self.width)
            || self.depth > MAX_DEPTH
            || self.conv.channels.is_some() && !(1..=MAX_DEPTH + 1).contains(&channels.len())
            || channels.iter().any(|c| !(1..=MAX_CHANNELS).contains(c))
            || self.conv.kernel.is_multiple_of(2)
            || !(1..=MAX_KERNEL).contains(&self.conv.kernel)
            || !(0.0..=MAX_HEAD_BOUND).contains(&self.conv.head_bound)
        {
            return Err(FlowError::LatticeShape {
                max_channels: MAX_CHANNELS,
            });
        }
        if self.stack.is_empty() {
            return Err(FlowError::EmptyStack { flow: "lattice" });
        }
        if self.z2 && self.stack.odd_raw().is_none() {
            return Err(FlowError::NoOddForm);
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct LatticeFlow<T> {
    pub spec: LatticeSpec,
    params: Vec<T>,
}

/// What one layer's forward pass keeps for its backward pass.
pub(super) struct LayerCache<T> {
    conv: ConvCache<T>,
    raw: Vec<T>,
    active: ActiveTrace<T>,
}

impl<T: Real> LatticeFlow<T> {
    /// As the coupling flows' `extract_init`: output kernel N(0, 1e-3^2) and
    /// output bias one draw of the stack's default raw values, so every layer
    /// starts near the identity (affine exactly at it).
    pub fn init(spec: LatticeSpec, rng: &mut Rng) -> Result<Self, FlowError> {
        spec.validate()?;
        let affine = spec.stack.layers().iter().all(|f| *f == Family::Affine);
        let shape = spec.conv();
        let mut params = Vec::with_capacity(spec.n_params());
        for _ in 0..spec.layers {
            let bias = spec.stack.default_raw(&mut || rng.normal());
            let out_std = if affine { 0.0 } else { 1e-3 };
            params.extend(shape.init(out_std, &bias, rng));
        }
        Ok(Self {
            spec,
            params: params.into_iter().map(T::c).collect(),
        })
    }

    pub fn from_params(spec: LatticeSpec, params: Vec<T>) -> Result<Self, FlowError> {
        spec.validate()?;
        if params.len() != spec.n_params() {
            return Err(FlowError::ParamCount {
                flow: "lattice",
                expected: spec.n_params(),
                got: params.len(),
            });
        }
        Ok(Self { spec, params })
    }

    fn layer_range(&self, l: usize) -> std::ops::Range<usize> {
        let per = self.spec.conv().n_params();
        l * per..(l + 1) * per
    }

    /// Copies of the field the conditioner runs on: the field with the active
    /// sites zeroed, and (Z2) its negation after it.
    fn copies(&self) -> usize {
        if self.spec.z2 { 2 } else { 1 }
    }
}

impl<T: Real> CouplingLayers<T> for LatticeFlow<T> {
    type Cache = LayerCache<T>;

    fn dim(&self) -> usize {
        self.spec.volume()
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
        let v = self.spec.volume();
        let n = log_det.len();
        let (active, passive) = self.spec.split(l);
        let p = self.spec.stack.n_raw();
        let copies = self.copies();
        let mut input = Array2::zeros((copies * n * v, 1));
        for i in 0..n {
            for &s in &passive {
                input[(i * v + s, 0)] = cur[i * v + s];
                if copies == 2 {
                    input[((n + i) * v + s, 0)] = -cur[i * v + s];
                }
            }
        }
        let (out, conv) = self
            .spec
            .conv()
            .forward(&self.params[self.layer_range(l)], input);
        let odd = self.spec.stack.odd_raw();
        let half = T::c(0.5);
        let mut raw = vec![T::zero(); n * active.len() * p];
        for i in 0..n {
            for (a, &s) in active.iter().enumerate() {
                let e = (i * active.len() + a) * p;
                for j in 0..p {
                    let plus = out[(i * v + s, j)];
                    raw[e + j] = match &odd {
                        Some(mask) if copies == 2 => {
                            let minus = out[((n + i) * v + s, j)];
                            if mask[j] {
                                half * (plus - minus)
                            } else {
                                half * (plus + minus)
                            }
                        }
                        _ => plus,
                    };
                }
            }
        }
        let active_trace = transform_active(&self.spec.stack, dir, &active, &raw, cur, log_det);
        LayerCache {
            conv,
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
        let v = self.spec.volume();
        let n = ld_bar.len();
        let (active, passive) = self.spec.split(l);
        let p = self.spec.stack.n_raw();
        let copies = self.copies();
        let mut raw_bar = vec![T::zero(); cache.raw.len()];
        transform_active_backward(
            &self.spec.stack,
            dir,
            &active,
            &cache.raw,
            &cache.active,
            bar,
            ld_bar,
            &mut raw_bar,
        );
        let odd = self.spec.stack.odd_raw();
        let half = T::c(0.5);
        let mut out_bar = Array2::zeros((copies * n * v, p));
        for i in 0..n {
            for (a, &s) in active.iter().enumerate() {
                let e = (i * active.len() + a) * p;
                for j in 0..p {
                    let rb = raw_bar[e + j];
                    match &odd {
                        Some(mask) if copies == 2 => {
                            out_bar[(i * v + s, j)] = half * rb;
                            out_bar[((n + i) * v + s, j)] =
                                if mask[j] { -half * rb } else { half * rb };
                        }
                        _ => out_bar[(i * v + s, j)] = rb,
                    }
                }
            }
        }
        let range = self.layer_range(l);
        let in_bar = self.spec.conv().backward(
            &self.params[range.clone()],
            &cache.conv,
            out_bar.view(),
            &mut grad[range],
        );
        // Only the passive sites were fed in; the zeroed active sites carry nothing.
        for i in 0..n {
            for &s in &passive {
                bar[i * v + s] += in_bar[(i * v + s, 0)];
                if copies == 2 {
                    bar[i * v + s] -= in_bar[((n + i) * v + s, 0)];
                }
            }
        }
    }
}

flow_through_layers!(LatticeFlow);
