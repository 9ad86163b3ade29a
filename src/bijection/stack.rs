//! Stacks of scalar layers `f_K o ... o f_1` (bijx `ScanChain`), one family or mixed.
//!
//! Raw parameters are laid out layer by layer (layer k's raw values are
//! contiguous, in its family's alphabetical order). A *trace* records the input
//! of every forward layer, which is also the output of every inverse layer; the
//! backward passes read it instead of recomputing the chain.

use super::{Family, LogSlopeSum, Scalar};

/// Most layers a stack may have (model files and flags are checked against it).
pub const MAX_STACK: usize = 1024;

/// Most lanes one lockstep call runs: a block of the packed passes
/// ([`super::lanes::LANES`]), whose families without a packed form run here.
pub const MAX_LANES: usize = super::lanes::LANES;
use crate::real::Real;

#[derive(Clone, Debug, PartialEq)]
pub struct Stack {
    layers: Vec<Family>,
    offsets: Vec<usize>,
    n_raw: usize,
}

impl Stack {
    /// `k` copies of one family.
    pub fn uniform(family: Family, k: usize) -> Self {
        Self::mixed(vec![family; k])
    }

    /// Layers applied in the given order in the sampling direction.
    pub fn mixed(layers: Vec<Family>) -> Self {
        let mut offsets = Vec::with_capacity(layers.len());
        let mut n_raw = 0;
        for f in &layers {
            offsets.push(n_raw);
            n_raw += f.n_raw();
        }
        Self {
            layers,
            offsets,
            n_raw,
        }
    }

    pub fn layers(&self) -> &[Family] {
        &self.layers
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Total number of raw parameters.
    pub fn n_raw(&self) -> usize {
        self.n_raw
    }

    /// Raw range of layer `k`.
    pub fn layer_range(&self, k: usize) -> std::ops::Range<usize> {
        self.offsets[k]..self.offsets[k] + self.layers[k].n_raw()
    }

    /// [`Family::odd_raw`] of every layer, in raw order; `None` when a layer has none.
    pub fn odd_raw(&self) -> Option<Vec<bool>> {
        let mut mask = Vec::with_capacity(self.n_raw);
        for family in &self.layers {
            mask.extend_from_slice(family.odd_raw()?);
        }
        Some(mask)
    }

    /// Default raw initialization of every layer.
    pub fn default_raw(&self, normal: &mut dyn FnMut() -> f64) -> Vec<f64> {
        self.layers
            .iter()
            .flat_map(|f| f.default_raw(normal))
            .collect()
    }

    /// Builds every layer from `raw` into `out` (reused between calls).
    pub fn build<T: Real>(&self, raw: &[T], out: &mut Vec<Scalar<T>>) {
        out.clear();
        for (k, &family) in self.layers.iter().enumerate() {
            out.push(Scalar::from_raw(family, &raw[self.layer_range(k)]));
        }
    }

    /// `(f(z), sum_k log f_k')`.
    #[inline]
    pub fn x_from_z<T: Real>(built: &[Scalar<T>], z: T) -> (T, T) {
        let mut x = z;
        let mut ld = T::zero();
        for layer in built {
            let (y, l) = layer.x_from_z(x);
            x = y;
            ld += l;
        }
        (x, ld)
    }

    /// `(f^-1(x), sum_k log f_k')` (the density log-det is the negative).
    #[inline]
    pub fn z_from_x<T: Real>(built: &[Scalar<T>], x: T) -> (T, T) {
        let mut z = x;
        let mut ld = T::zero();
        for layer in built.iter().rev() {
            let (y, l) = layer.z_from_x(z);
            z = y;
            ld += l;
        }
        (z, ld)
    }

    // Traced passes. The `_lanes` forms run several independent chains (one per
    // lane, each with its own layers; at most MAX_LANES) in lockstep, layer by
    // layer: a chain is a sequence of dependent operations, and interleaving
    // lanes lets the CPU overlap them. `traces` holds `lanes x K` values.

    /// `f(z)` alone, recording each layer's input in `trace`.
    #[inline]
    pub fn x_from_z_value_trace<T: Real>(built: &[Scalar<T>], z: T, trace: &mut [T]) -> T {
        let mut v = [z];
        Self::x_from_z_value_lanes(&[built], &mut v, trace);
        v[0]
    }

    /// As [`Stack::x_from_z`], recording each layer's input in `trace`.
    #[inline]
    pub fn x_from_z_trace<T: Real>(built: &[Scalar<T>], z: T, trace: &mut [T]) -> (T, T) {
        let (mut v, mut ld) = ([z], [T::zero()]);
        Self::x_from_z_lanes(&[built], &mut v, &mut ld, trace);
        (v[0], ld[0])
    }

    /// As [`Stack::z_from_x`], recording each layer's input (forward sense) in `trace`.
    #[inline]
    pub fn z_from_x_trace<T: Real>(built: &[Scalar<T>], x: T, trace: &mut [T]) -> (T, T) {
        let (mut v, mut ld) = ([x], [T::zero()]);
        Self::z_from_x_lanes(&[built], &mut v, &mut ld, trace);
        (v[0], ld[0])
    }

    /// Lanes of [`Stack::x_from_z_value_trace`]: `v` in, `f(v)` out.
    #[inline]
    pub fn x_from_z_value_lanes<T: Real, B: AsRef<[Scalar<T>]>>(
        built: &[B],
        v: &mut [T],
        traces: &mut [T],
    ) {
        let k_len = traces.len() / v.len().max(1);
        for k in 0..k_len {
            for (lane, x) in v.iter_mut().enumerate() {
                traces[lane * k_len + k] = *x;
                *x = built[lane].as_ref()[k].x_from_z_value(*x);
            }
        }
    }

    /// Lanes of [`Stack::x_from_z_trace`]: `v` in, `f(v)` out, `sum log f'` into `ld`.
    #[inline]
    pub fn x_from_z_lanes<T: Real, B: AsRef<[Scalar<T>]>>(
        built: &[B],
        v: &mut [T],
        ld: &mut [T],
        traces: &mut [T],
    ) {
        let k_len = traces.len() / v.len().max(1);
        let mut sums = [LogSlopeSum::default(); MAX_LANES];
        for k in 0..k_len {
            for (lane, x) in v.iter_mut().enumerate() {
                traces[lane * k_len + k] = *x;
                let (y, slope) = built[lane].as_ref()[k].x_from_z_slope(*x);
                *x = y;
                sums[lane].add(slope);
            }
        }
        for (l, sum) in ld.iter_mut().zip(&sums) {
            *l = sum.value();
        }
    }

    /// Lanes of [`Stack::z_from_x_trace`]: `v` in, `f^-1(v)` out, `sum log f'` into `ld`.
    #[inline]
    pub fn z_from_x_lanes<T: Real, B: AsRef<[Scalar<T>]>>(
        built: &[B],
        v: &mut [T],
        ld: &mut [T],
        traces: &mut [T],
    ) {
        let k_len = traces.len() / v.len().max(1);
        let mut sums = [LogSlopeSum::default(); MAX_LANES];
        for k in (0..k_len).rev() {
            for (lane, x) in v.iter_mut().enumerate() {
                let (y, slope) = built[lane].as_ref()[k].z_from_x_slope(*x);
                *x = y;
                traces[lane * k_len + k] = y;
                sums[lane].add(slope);
            }
        }
        for (l, sum) in ld.iter_mut().zip(&sums) {
            *l = sum.value();
        }
    }

    /// `f(r) - f(0)` from the trace of the chain at 0 (`trace0`, output `f0`),
    /// layer by layer as differences: no cancellation when `r` is small against
    /// the values along that chain.
    pub fn x_from_z_diff<T: Real>(built: &[Scalar<T>], trace0: &[T], f0: T, r: T) -> T {
        let n = built.len();
        let mut d = r;
        for k in 0..n {
            let y0 = if k + 1 < n { trace0[k + 1] } else { f0 };
            d = built[k].x_from_z_diff(trace0[k], y0, d);
        }
        d
    }

    /// `f^-1(f(0) + e) - 0` from the trace of the chain at 0, as differences;
    /// writes the layer inputs `trace0 + difference` into `trace`.
    pub fn z_from_x_diff<T: Real>(
        built: &[Scalar<T>],
        trace0: &[T],
        f0: T,
        e: T,
        trace: &mut [T],
    ) -> T {
        let n = built.len();
        let mut d = e;
        for k in (0..n).rev() {
            let y0 = if k + 1 < n { trace0[k + 1] } else { f0 };
            d = built[k].z_from_x_diff(trace0[k], y0, d);
            trace[k] = trace0[k] + d;
        }
        d
    }

    /// Backward through `x_from_z`: given the trace, the stack's output `x`, and
    /// the adjoints of `x` and of `sum log f'`, adds raw adjoints into `raw_bar`
    /// (all layers) and returns the input adjoint.
    #[inline]
    pub fn x_from_z_backward<T: Real>(
        &self,
        built: &[Scalar<T>],
        trace: &[T],
        x: T,
        x_bar: T,
        ld_bar: T,
        raw_bar: &mut [T],
    ) -> T {
        let mut bar = [x_bar];
        self.x_from_z_backward_lanes(&[built], trace, &[x], &mut bar, &[ld_bar], raw_bar);
        bar[0]
    }

    /// Backward through `z_from_x` with density log-det `-sum log f'`: given the
    /// trace, the stack's input `x`, and the adjoints of the output and of that
    /// log-det, adds raw adjoints and returns the input adjoint.
    #[inline]
    pub fn z_from_x_backward<T: Real>(
        &self,
        built: &[Scalar<T>],
        trace: &[T],
        x: T,
        z_bar: T,
        ld_bar: T,
        raw_bar: &mut [T],
    ) -> T {
        let mut bar = [z_bar];
        self.z_from_x_backward_lanes(&[built], trace, &[x], &mut bar, &[ld_bar], raw_bar);
        bar[0]
    }

    /// Lanes of [`Stack::x_from_z_backward`]: `bar` holds each lane's output
    /// adjoint and receives its input adjoint; `raw_bar` is `lanes x n_raw`.
    #[inline]
    pub fn x_from_z_backward_lanes<T: Real, B: AsRef<[Scalar<T>]>>(
        &self,
        built: &[B],
        traces: &[T],
        out: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        let k_len = self.len();
        let n_raw = self.n_raw;
        for k in (0..k_len).rev() {
            let range = self.layer_range(k);
            for (lane, b) in bar.iter_mut().enumerate() {
                let t = &traces[lane * k_len..(lane + 1) * k_len];
                let y = if k + 1 < k_len { t[k + 1] } else { out[lane] };
                let rb = &mut raw_bar[lane * n_raw + range.start..lane * n_raw + range.end];
                *b = built[lane].as_ref()[k].x_from_z_vjp(t[k], y, *b, ld_bar[lane], rb);
            }
        }
    }

    /// Lanes of [`Stack::z_from_x_backward`] (see [`Stack::x_from_z_backward_lanes`]).
    #[inline]
    pub fn z_from_x_backward_lanes<T: Real, B: AsRef<[Scalar<T>]>>(
        &self,
        built: &[B],
        traces: &[T],
        x: &[T],
        bar: &mut [T],
        ld_bar: &[T],
        raw_bar: &mut [T],
    ) {
        let k_len = self.len();
        let n_raw = self.n_raw;
        for k in 0..k_len {
            let range = self.layer_range(k);
            for (lane, b) in bar.iter_mut().enumerate() {
                let t = &traces[lane * k_len..(lane + 1) * k_len];
                let y = if k + 1 < k_len { t[k + 1] } else { x[lane] };
                let rb = &mut raw_bar[lane * n_raw + range.start..lane * n_raw + range.end];
                *b = built[lane].as_ref()[k].z_from_x_vjp(t[k], y, *b, ld_bar[lane], rb);
            }
        }
    }
}
