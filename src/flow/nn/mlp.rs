//! The ResNet MLP conditioner of coupling flows (bijx defaults: width 128,
//! depth 2, tanh-GELU): `h = W0 x + b0`; `depth` times `h = h + W_i gelu(h) + b_i`;
//! `out = W_out h + b_out`. Batched as matrix products (ndarray, which multiplies
//! with the `matrixmultiply` kernels).
//!
//! Parameter layout: `W0 (n_in x width), b0, [W_i (width x width), b_i] * depth,
//! W_out (width x n_out), b_out`, kernels row-major as flax stores them (in, out).

use super::{gelu_gates_in_place, gelu_prime_from_gate};
use crate::real::Real;
use crate::rng::Rng;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MlpShape {
    pub n_in: usize,
    pub width: usize,
    pub depth: usize,
    pub n_out: usize,
}

/// Activations of one forward pass, kept for the backward pass.
pub struct MlpCache<T> {
    input: Array2<T>,
    /// the last hidden state h_depth (the output layer's input)
    last: Array2<T>,
    /// gelu(h_0) .. gelu(h_depth-1)
    acts: Vec<Array2<T>>,
    /// gelu'(h_0) .. gelu'(h_depth-1), taken in the forward pass from the
    /// gates it computes anyway, so the backward pass reads one array where
    /// it read two (the hidden state and its gate) and computes nothing
    slopes: Vec<Array2<T>>,
}

impl MlpShape {
    pub fn n_params(&self) -> usize {
        let (i, w, o) = (self.n_in, self.width, self.n_out);
        i * w + w + self.depth * (w * w + w) + w * o + o
    }

    /// Ranges of (kernel, bias) for layer `k` (0 = input, 1..=depth blocks, depth+1 = output),
    /// and the kernel's (rows, columns). The bias follows its kernel, so the two
    /// read as one (rows + 1) x columns matrix.
    pub fn layer(
        &self,
        k: usize,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>, usize, usize) {
        let w = self.width;
        let mut off = 0;
        let dims = |k: usize| -> (usize, usize) {
            if k == 0 {
                (self.n_in, w)
            } else if k <= self.depth {
                (w, w)
            } else {
                (w, self.n_out)
            }
        };
        for j in 0..k {
            let (a, b) = dims(j);
            off += a * b + b;
        }
        let (a, b) = dims(k);
        (off..off + a * b, off + a * b..off + a * b + b, a, b)
    }

    /// flax defaults: lecun-normal kernels and zero biases, then the output layer
    /// as given: kernel N(0, out_std^2) and bias `out_bias`.
    pub fn init(&self, out_std: f64, out_bias: &[f64], rng: &mut Rng) -> Vec<f64> {
        let mut p = vec![0.0; self.n_params()];
        for k in 0..=self.depth {
            let (kr, _, fan_in, _) = self.layer(k);
            let std = 1.0 / (fan_in as f64).sqrt();
            for v in &mut p[kr] {
                *v = std * rng.truncated_normal();
            }
        }
        let (kr, br, _, _) = self.layer(self.depth + 1);
        for v in &mut p[kr] {
            *v = out_std * rng.normal();
        }
        p[br].copy_from_slice(out_bias);
        p
    }

    fn kernel<'a, T: Real>(&self, params: &'a [T], k: usize) -> (ArrayView2<'a, T>, &'a [T]) {
        let (kr, br, a, b) = self.layer(k);
        let view = ArrayView2::from_shape((a, b), &params[kr])
            .unwrap_or_else(|_| unreachable!("sized by layer()"));
        (view, &params[br])
    }

    /// Forward pass on a batch `input` (n x n_in); returns (n x n_out) and the cache.
    pub fn forward<T: Real>(&self, params: &[T], input: Array2<T>) -> (Array2<T>, MlpCache<T>) {
        let n = input.nrows();
        let (w0, b0) = self.kernel(params, 0);
        let mut h = Array2::from_shape_fn((n, self.width), |(_, j)| b0[j]);
        general_mat_mul(T::one(), &input, &w0, T::one(), &mut h);
        let mut acts = Vec::with_capacity(self.depth);
        let mut slopes = Vec::with_capacity(self.depth);
        for k in 1..=self.depth {
            let (wk, bk) = self.kernel(params, k);
            let mut slope = h.as_standard_layout().into_owned();
            gelu_gates_in_place(
                slope
                    .as_slice_mut()
                    .unwrap_or_else(|| unreachable!("a standard-layout array")),
            );
            // gelu(h) = h * gate, and the gate becomes gelu'(h)
            let act = ndarray::Zip::from(&h)
                .and(&mut slope)
                .map_collect(|&x, gate| {
                    let s = *gate;
                    *gate = gelu_prime_from_gate(x, s);
                    x * s
                });
            // the residual block in place: h + b + W gelu(h)
            h.axis_iter_mut(Axis(0)).for_each(|mut row| {
                row.iter_mut().zip(bk).for_each(|(v, &b)| *v += b);
            });
            general_mat_mul(T::one(), &act, &wk, T::one(), &mut h);
            acts.push(act);
            slopes.push(slope);
        }
        let (wo, bo) = self.kernel(params, self.depth + 1);
        let mut out = Array2::from_shape_fn((n, self.n_out), |(_, j)| bo[j]);
        general_mat_mul(T::one(), &h, &wo, T::one(), &mut out);
        (
            out,
            MlpCache {
                input,
                last: h,
                acts,
                slopes,
            },
        )
    }

    /// Backward pass: adds parameter adjoints into `grad` and returns the input's adjoint.
    pub fn backward<T: Real>(
        &self,
        params: &[T],
        cache: &MlpCache<T>,
        out_bar: ArrayView2<T>,
        grad: &mut [T],
    ) -> Array2<T> {
        let (wo, _) = self.kernel(params, self.depth + 1);
        self.accumulate(grad, self.depth + 1, cache.last.view(), out_bar);
        let mut h_bar = Array2::zeros((out_bar.nrows(), self.width));
        general_mat_mul(T::one(), &out_bar, &wo.t(), T::zero(), &mut h_bar);
        // one buffer for every block's act_bar: a product with beta = 0
        // overwrites it
        let mut act_bar = Array2::zeros(h_bar.raw_dim());
        for k in (1..=self.depth).rev() {
            let (wk, _) = self.kernel(params, k);
            self.accumulate(grad, k, cache.acts[k - 1].view(), h_bar.view());
            general_mat_mul(T::one(), &h_bar, &wk.t(), T::zero(), &mut act_bar);
            // residual block: h_bar(k-1) = h_bar(k) + act_bar * gelu'(h(k-1))
            ndarray::Zip::from(&mut h_bar)
                .and(&act_bar)
                .and(&cache.slopes[k - 1])
                .for_each(|hb, &ab, &slope| *hb += ab * slope);
        }
        self.accumulate(grad, 0, cache.input.view(), h_bar.view());
        let (w0, _) = self.kernel(params, 0);
        let mut in_bar = Array2::zeros((out_bar.nrows(), self.n_in));
        general_mat_mul(T::one(), &h_bar, &w0.t(), T::zero(), &mut in_bar);
        in_bar
    }

    /// grad(kernel k) += input^T out_bar; grad(bias k) += column sums of out_bar.
    fn accumulate<T: Real>(
        &self,
        grad: &mut [T],
        k: usize,
        input: ArrayView2<T>,
        out_bar: ArrayView2<T>,
    ) {
        let (kr, br, a, b) = self.layer(k);
        {
            let mut gk = ArrayViewMut2::from_shape((a, b), &mut grad[kr])
                .unwrap_or_else(|_| unreachable!("sized by layer()"));
            general_mat_mul(T::one(), &input.t(), &out_bar, T::one(), &mut gk);
        }
        for row in out_bar.axis_iter(Axis(0)) {
            for (g, &v) in grad[br.clone()].iter_mut().zip(row.iter()) {
                *g += v;
            }
        }
    }
}
