//! The convolutional conditioner of lattice coupling flows: the ResNet of
//! [`super::mlp`] with every dense layer replaced by a 3 x 3 convolution on the
//! periodic L x L lattice, so one set of weights serves every site (the
//! lattice's translation symmetry): `h = K0 * x + b0`; `depth` times
//! `h = h + K_i * gelu(h) + b_i`; `out = K_out * h + b_out`.
//!
//! A batch is a matrix with one row per (sample, site), `i * V + s` with
//! `s = y * L + x`, and one column per channel. A convolution is a dense layer
//! on each site's 3 x 3 neighbourhood: the neighbourhoods are gathered into a
//! `(n V) x (9 c_in)` matrix and multiplied by the `(9 c_in) x c_out` kernel
//! (ndarray's matrix kernels), and the backward pass scatters back. Parameter
//! layout: `K0, b0, [K_i, b_i] * depth, K_out, b_out`, kernels row-major with
//! rows ordered (offset, input channel), offsets `(dy, dx)` in row-major order
//! over {-1, 0, 1}^2.

use super::{gelu, gelu_prime};
use crate::real::Real;
use crate::rng::Rng;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};

/// Taps of a 3 x 3 kernel.
const TAPS: usize = 9;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvShape {
    /// Lattice side L.
    pub size: usize,
    pub c_in: usize,
    pub width: usize,
    pub depth: usize,
    pub c_out: usize,
}

/// Activations of one forward pass, kept for the backward pass.
pub struct ConvCache<T> {
    input: Array2<T>,
    /// hidden states h_0 .. h_depth (before each block's activation)
    hidden: Vec<Array2<T>>,
    /// gelu(h_0) .. gelu(h_depth-1)
    acts: Vec<Array2<T>>,
}

impl ConvShape {
    pub fn volume(&self) -> usize {
        self.size * self.size
    }

    pub fn n_params(&self) -> usize {
        (0..=self.depth + 1)
            .map(|k| {
                let (a, b) = self.dims(k);
                TAPS * a * b + b
            })
            .sum()
    }

    /// (input, output) channels of layer `k` (0 = input, 1..=depth, depth+1 = output).
    fn dims(&self, k: usize) -> (usize, usize) {
        if k == 0 {
            (self.c_in, self.width)
        } else if k <= self.depth {
            (self.width, self.width)
        } else {
            (self.width, self.c_out)
        }
    }

    /// Ranges of (kernel, bias) of layer `k`, and the kernel's (rows, columns).
    pub fn layer(
        &self,
        k: usize,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>, usize, usize) {
        let off: usize = (0..k)
            .map(|j| {
                let (a, b) = self.dims(j);
                TAPS * a * b + b
            })
            .sum();
        let (a, b) = self.dims(k);
        let rows = TAPS * a;
        (
            off..off + rows * b,
            off + rows * b..off + rows * b + b,
            rows,
            b,
        )
    }

    /// Lecun-normal kernels and zero biases, then the output layer as given:
    /// kernel N(0, out_std^2), bias `out_bias` (one value per output channel).
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

    /// Site index of each tap of each site (periodic).
    fn neighbours(&self) -> Vec<[usize; TAPS]> {
        let l = self.size as isize;
        (0..self.volume())
            .map(|s| {
                let (y, x) = ((s / self.size) as isize, (s % self.size) as isize);
                let mut taps = [0; TAPS];
                for (t, tap) in taps.iter_mut().enumerate() {
                    let (dy, dx) = (t as isize / 3 - 1, t as isize % 3 - 1);
                    *tap = ((y + dy).rem_euclid(l) * l + (x + dx).rem_euclid(l)) as usize;
                }
                taps
            })
            .collect()
    }

    /// Gathers each row's 3 x 3 neighbourhood: `(n V) x c` to `(n V) x (9 c)`.
    fn patches<T: Real>(&self, x: &Array2<T>, nb: &[[usize; TAPS]]) -> Array2<T> {
        let (rows, c) = x.dim();
        let v = self.volume();
        let mut out = Array2::zeros((rows, TAPS * c));
        for (row, mut patch) in out.axis_iter_mut(Axis(0)).enumerate() {
            let base = row - row % v;
            for (t, &site) in nb[row % v].iter().enumerate() {
                let src = x.row(base + site);
                for ch in 0..c {
                    patch[t * c + ch] = src[ch];
                }
            }
        }
        out
    }

    /// The adjoint of [`ConvShape::patches`]: scatters `(n V) x (9 c)` back to `(n V) x c`.
    fn scatter<T: Real>(&self, p_bar: &Array2<T>, c: usize, nb: &[[usize; TAPS]]) -> Array2<T> {
        let rows = p_bar.nrows();
        let v = self.volume();
        let mut out = Array2::zeros((rows, c));
        for (row, patch) in p_bar.axis_iter(Axis(0)).enumerate() {
            let base = row - row % v;
            for (t, &site) in nb[row % v].iter().enumerate() {
                let mut dst = out.row_mut(base + site);
                for ch in 0..c {
                    dst[ch] += patch[t * c + ch];
                }
            }
        }
        out
    }

    fn kernel<'a, T: Real>(&self, params: &'a [T], k: usize) -> (ArrayView2<'a, T>, &'a [T]) {
        let (kr, br, a, b) = self.layer(k);
        let view = ArrayView2::from_shape((a, b), &params[kr])
            .unwrap_or_else(|_| unreachable!("sized by layer()"));
        (view, &params[br])
    }

    /// `bias + K * x` for layer `k`, added into `out`.
    fn conv<T: Real>(
        &self,
        params: &[T],
        k: usize,
        x: &Array2<T>,
        nb: &[[usize; TAPS]],
        out: &mut Array2<T>,
    ) {
        let (kernel, bias) = self.kernel(params, k);
        out.axis_iter_mut(Axis(0)).for_each(|mut row| {
            row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
        });
        general_mat_mul(T::one(), &self.patches(x, nb), &kernel, T::one(), out);
    }

    /// Forward pass on `(n V) x c_in`; returns `(n V) x c_out` and the cache.
    pub fn forward<T: Real>(&self, params: &[T], input: Array2<T>) -> (Array2<T>, ConvCache<T>) {
        let rows = input.nrows();
        let nb = self.neighbours();
        let mut h = Array2::zeros((rows, self.width));
        self.conv(params, 0, &input, &nb, &mut h);
        let mut hidden = Vec::with_capacity(self.depth + 1);
        let mut acts = Vec::with_capacity(self.depth);
        for k in 1..=self.depth {
            let act = h.mapv(gelu);
            let mut next = h.clone();
            self.conv(params, k, &act, &nb, &mut next);
            hidden.push(h);
            acts.push(act);
            h = next;
        }
        let mut out = Array2::zeros((rows, self.c_out));
        self.conv(params, self.depth + 1, &h, &nb, &mut out);
        hidden.push(h);
        (
            out,
            ConvCache {
                input,
                hidden,
                acts,
            },
        )
    }

    /// Backward pass: adds parameter adjoints into `grad` and returns the input's adjoint.
    pub fn backward<T: Real>(
        &self,
        params: &[T],
        cache: &ConvCache<T>,
        out_bar: ArrayView2<T>,
        grad: &mut [T],
    ) -> Array2<T> {
        let nb = self.neighbours();
        let mut h_bar = self.conv_backward(
            params,
            self.depth + 1,
            &cache.hidden[self.depth],
            out_bar,
            &nb,
            grad,
        );
        for k in (1..=self.depth).rev() {
            let act_bar =
                self.conv_backward(params, k, &cache.acts[k - 1], h_bar.view(), &nb, grad);
            // residual block: h_bar(k-1) = h_bar(k) + act_bar * gelu'(h(k-1))
            ndarray::Zip::from(&mut h_bar)
                .and(&act_bar)
                .and(&cache.hidden[k - 1])
                .for_each(|hb, &ab, &hp| *hb += ab * gelu_prime(hp));
        }
        self.conv_backward(params, 0, &cache.input, h_bar.view(), &nb, grad)
    }

    /// One convolution backward: grad(K_k) += patches^T out_bar, grad(b_k) +=
    /// column sums; returns the adjoint of its input `x`.
    fn conv_backward<T: Real>(
        &self,
        params: &[T],
        k: usize,
        x: &Array2<T>,
        out_bar: ArrayView2<T>,
        nb: &[[usize; TAPS]],
        grad: &mut [T],
    ) -> Array2<T> {
        let (kr, br, a, b) = self.layer(k);
        let patches = self.patches(x, nb);
        {
            let mut gk = ArrayViewMut2::from_shape((a, b), &mut grad[kr])
                .unwrap_or_else(|_| unreachable!("sized by layer()"));
            general_mat_mul(T::one(), &patches.t(), &out_bar, T::one(), &mut gk);
        }
        for row in out_bar.axis_iter(Axis(0)) {
            for (g, &v) in grad[br.clone()].iter_mut().zip(row.iter()) {
                *g += v;
            }
        }
        let (kernel, _) = self.kernel(params, k);
        let mut p_bar = Array2::zeros((out_bar.nrows(), a));
        general_mat_mul(T::one(), &out_bar, &kernel.t(), T::zero(), &mut p_bar);
        self.scatter(&p_bar, x.ncols(), nb)
    }
}
