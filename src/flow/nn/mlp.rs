//! The ResNet MLP conditioner of coupling flows (bijx defaults: width 128,
//! depth 2, tanh-GELU): `h = W0 x + b0`; `depth` times `h = h + W_i gelu(h) + b_i`;
//! `out = W_out h + b_out`. Batched as matrix products (ndarray, which multiplies
//! with the `matrixmultiply` kernels).
//!
//! Parameter layout: `W0 (n_in x width), b0, [W_i (width x width), b_i] * depth,
//! W_out (width x n_out), b_out`, kernels row-major as flax stores them (in, out).

use super::{gelu_gates_in_place, gelu_prime_from_gate};
use crate::real::{Real, on_widest_vectors_for};
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
            let (mut act, mut slope) = (h.clone(), h.clone());
            on_widest_vectors_for(
                h.len(),
                #[inline(always)]
                || {
                    gelu_block(
                        standard(&mut h),
                        bk,
                        standard(&mut act),
                        standard(&mut slope),
                    )
                },
            );
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
            let (ab, slope) = (slice(&act_bar), slice(&cache.slopes[k - 1]));
            let hb = standard(&mut h_bar);
            // the zips below would stop at the shorter slice
            debug_assert_eq!((hb.len(), slope.len()), (ab.len(), ab.len()));
            on_widest_vectors_for(
                hb.len(),
                #[inline(always)]
                || {
                    for ((hb, &ab), &slope) in hb.iter_mut().zip(ab).zip(slope) {
                        *hb += ab * slope;
                    }
                },
            );
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
        let g_bias = &mut grad[br];
        match out_bar.as_slice() {
            Some(rows) => on_widest_vectors_for(
                rows.len(),
                #[inline(always)]
                || {
                    for row in rows.chunks_exact(b.max(1)) {
                        for (g, &v) in g_bias.iter_mut().zip(row) {
                            *g += v;
                        }
                    }
                },
            ),
            None => {
                for row in out_bar.axis_iter(Axis(0)) {
                    for (g, &v) in g_bias.iter_mut().zip(row.iter()) {
                        *g += v;
                    }
                }
            }
        }
    }
}

/// One residual block's element-wise work, on row-major arrays of the same
/// shape: `act` and `slope` arrive as copies of `h` and leave as `gelu(h)`
/// and `gelu'(h)`, then `h` gets the block's bias added to each row. Inlined
/// into [`crate::real::on_widest_vectors_for`].
#[inline(always)]
fn gelu_block<T: Real>(h: &mut [T], bias: &[T], act: &mut [T], slope: &mut [T]) {
    gelu_gates_in_place(slope);
    // gelu(h) = h * gate, and the gate becomes gelu'(h)
    for (x, gate) in act.iter_mut().zip(slope.iter_mut()) {
        let s = *gate;
        *gate = gelu_prime_from_gate(*x, s);
        *x *= s;
    }
    for row in h.chunks_exact_mut(bias.len().max(1)) {
        for (v, &b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// The values of an array the MLP made itself (standard layout), as a slice.
fn slice<T>(a: &Array2<T>) -> &[T] {
    a.as_slice()
        .unwrap_or_else(|| unreachable!("a standard-layout array"))
}

/// As [`slice`], mutable.
fn standard<T>(a: &mut Array2<T>) -> &mut [T] {
    a.as_slice_mut()
        .unwrap_or_else(|| unreachable!("a standard-layout array"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::nn::{gelu, gelu_prime};
    use crate::real::on_widest_vectors;

    /// Rows of hidden states across GELU's range: both tails (where the
    /// gate's exponent is clamped), zero of either sign, and the middle.
    fn hidden(rows: usize, width: usize) -> Vec<f32> {
        (0..rows * width)
            .map(|i| match i % 37 {
                0 => 0.0,
                1 => -0.0,
                2 => 95.0,
                3 => -95.0,
                j => (j as f32 - 18.0) * 0.61 + (i as f32 * 0.013).sin(),
            })
            .collect()
    }

    #[test]
    fn the_gelu_block_on_the_widest_vectors_is_the_same_bits_as_on_four_lanes() {
        let (rows, width) = (7, 128);
        let bias: Vec<f32> = (0..width).map(|j| (j as f32 * 0.3).cos()).collect();
        let start = hidden(rows, width);
        // inside the dispatch (AVX-512 or AVX2 where the processor has them)
        // and outside it (the build's baseline, SSE2)
        let run = |widest: bool| {
            let (mut h, mut act, mut slope) = (start.clone(), start.clone(), start.clone());
            if widest {
                on_widest_vectors(
                    #[inline(always)]
                    || gelu_block(&mut h, &bias, &mut act, &mut slope),
                );
            } else {
                gelu_block(&mut h, &bias, &mut act, &mut slope);
            }
            (h, act, slope)
        };
        let (wide, narrow) = (run(true), run(false));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&wide.0), bits(&narrow.0), "h + bias");
        assert_eq!(bits(&wide.1), bits(&narrow.1), "gelu(h)");
        assert_eq!(bits(&wide.2), bits(&narrow.2), "gelu'(h)");
        // and they are the scalar rules (the gates' exponentials are the
        // vector exp, within a few ulp of the standard library's)
        for (i, &x) in start.iter().enumerate() {
            let close = |got: f32, want: f32| (got - want).abs() <= 1e-6 * want.abs().max(1.0);
            assert!(close(wide.1[i], gelu(x)), "gelu({x}) = {}", wide.1[i]);
            assert!(
                close(wide.2[i], gelu_prime(x)),
                "gelu'({x}) = {}",
                wide.2[i]
            );
            assert_eq!(wide.0[i], x + bias[i % width], "h + bias at {i}");
        }
    }
}
