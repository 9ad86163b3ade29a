//! Stacks of scalar layers `f_K o ... o f_1` (bijx `ScanChain`), one family or mixed.
//!
//! Raw parameters are laid out layer by layer (layer k's raw values are
//! contiguous, in its family's alphabetical order). A *trace* records the input
//! of every forward layer, which is also the output of every inverse layer; the
//! backward passes read it instead of recomputing the chain.

use super::{Family, Scalar};
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

    /// As [`Stack::x_from_z`], recording each layer's input in `trace`.
    #[inline]
    pub fn x_from_z_trace<T: Real>(built: &[Scalar<T>], z: T, trace: &mut [T]) -> (T, T) {
        let mut x = z;
        let mut ld = T::zero();
        for (layer, t) in built.iter().zip(trace.iter_mut()) {
            *t = x;
            let (y, l) = layer.x_from_z(x);
            x = y;
            ld += l;
        }
        (x, ld)
    }

    /// `f(z)` alone, recording each layer's input in `trace` (no log-derivative).
    #[inline]
    pub fn x_from_z_value_trace<T: Real>(built: &[Scalar<T>], z: T, trace: &mut [T]) -> T {
        let mut x = z;
        for (layer, t) in built.iter().zip(trace.iter_mut()) {
            *t = x;
            x = layer.x_from_z_value(x);
        }
        x
    }

    /// As [`Stack::z_from_x`], recording each layer's input (forward sense) in `trace`.
    #[inline]
    pub fn z_from_x_trace<T: Real>(built: &[Scalar<T>], x: T, trace: &mut [T]) -> (T, T) {
        let mut z = x;
        let mut ld = T::zero();
        for (layer, t) in built.iter().zip(trace.iter_mut()).rev() {
            let (y, l) = layer.z_from_x(z);
            z = y;
            *t = z;
            ld += l;
        }
        (z, ld)
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
        let mut bar = x_bar;
        let mut out = x;
        for k in (0..built.len()).rev() {
            bar = built[k].x_from_z_vjp(trace[k], out, bar, ld_bar, &mut raw_bar[self.layer_range(k)]);
            out = trace[k];
        }
        bar
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
        let mut bar = z_bar;
        let n = built.len();
        for k in 0..n {
            let out = if k + 1 < n { trace[k + 1] } else { x };
            bar = built[k].z_from_x_vjp(trace[k], out, bar, ld_bar, &mut raw_bar[self.layer_range(k)]);
        }
        bar
    }
}
