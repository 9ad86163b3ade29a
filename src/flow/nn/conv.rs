//! The convolutional conditioner of lattice coupling flows: every layer a
//! `k x k` convolution on the periodic L x L lattice, so one set of weights
//! serves every site (the lattice's translation symmetry). Two ways to join
//! the hidden layers:
//!
//! - residual (the default, the ResNet of [`super::mlp`] with convolutions):
//!   `h = K0 * x + b0`; for each further hidden layer `h = h + K_i * act(h) + b_i`;
//!   `out = K_out * h + b_out` (every hidden layer has the same channels);
//! - plain (the phi^4 tutorials' conditioner, e.g. 1 -> 8 -> 8 -> out):
//!   `a = act(K_i * a + b_i)` for each hidden layer, `out = K_out * a + b_out`.
//!
//! An optional bounded head maps the output to `B tanh(out / B)`, so no raw
//! value of the site maps can run away; its bias is set so the flow starts
//! where the identity head would.
//!
//! A batch is a matrix with one row per (sample, site), `i * V + s` with
//! `s = y * L + x`, and one column per channel. A convolution is a dense layer
//! on each site's `k x k` neighbourhood: the neighbourhoods are gathered into a
//! `(n V) x (k^2 c_in)` matrix and multiplied by the `(k^2 c_in) x c_out` kernel
//! (ndarray's matrix kernels), and the backward pass scatters back. Parameter
//! layout: `K0, b0, K1, b1, ..., K_out, b_out`, kernels row-major with rows
//! ordered (offset, input channel), offsets `(dy, dx)` in row-major order over
//! `{-r, ..., r}^2`, `r = (k - 1) / 2`.

use super::Activation;
use crate::real::Real;
use crate::rng::Rng;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};

/// Largest kernel side.
pub const MAX_KERNEL: usize = 7;

#[derive(Clone, Debug, PartialEq)]
pub struct ConvShape {
    /// Lattice side L.
    pub size: usize,
    pub c_in: usize,
    /// Channels of each hidden layer (at least one).
    pub hidden: Vec<usize>,
    pub c_out: usize,
    /// Residual joins (all hidden layers as wide) or plain ones.
    pub residual: bool,
    /// Kernel side k (odd).
    pub kernel: usize,
    pub activation: Activation,
    /// `B` of the bounded head `B tanh(out / B)`; 0 for the identity head.
    pub head_bound: f64,
}

/// Activations of one forward pass, kept for the backward pass.
pub struct ConvCache<T> {
    input: Array2<T>,
    /// Residual: h_0 .. h_last; plain: each hidden layer's value before its activation.
    hidden: Vec<Array2<T>>,
    /// Residual: act(h_0) .. act(h_last-1); plain: act of each hidden layer.
    acts: Vec<Array2<T>>,
    /// tanh(out / B) of the bounded head.
    head: Option<Array2<T>>,
}

/// Site index of each tap of each site.
type Neighbours = Vec<Vec<usize>>;

impl ConvShape {
    pub fn volume(&self) -> usize {
        self.size * self.size
    }

    fn taps(&self) -> usize {
        self.kernel * self.kernel
    }

    /// Convolutions: one per hidden layer, then the output.
    fn n_convs(&self) -> usize {
        self.hidden.len() + 1
    }

    pub fn n_params(&self) -> usize {
        (0..self.n_convs())
            .map(|k| {
                let (a, b) = self.dims(k);
                self.taps() * a * b + b
            })
            .sum()
    }

    /// (input, output) channels of convolution `k` (the last is the output).
    fn dims(&self, k: usize) -> (usize, usize) {
        let a = if k == 0 {
            self.c_in
        } else {
            self.hidden[k - 1]
        };
        let b = self.hidden.get(k).copied().unwrap_or(self.c_out);
        (a, b)
    }

    /// Ranges of (kernel, bias) of convolution `k`, and the kernel's (rows, columns).
    pub fn layer(
        &self,
        k: usize,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>, usize, usize) {
        let off: usize = (0..k)
            .map(|j| {
                let (a, b) = self.dims(j);
                self.taps() * a * b + b
            })
            .sum();
        let (a, b) = self.dims(k);
        let rows = self.taps() * a;
        (
            off..off + rows * b,
            off + rows * b..off + rows * b + b,
            rows,
            b,
        )
    }

    /// Lecun-normal kernels and zero biases, then the output layer as given:
    /// kernel N(0, out_std^2), and a bias that makes the head give `out_bias`
    /// (one value per output channel) at a zero kernel.
    pub fn init(&self, out_std: f64, out_bias: &[f64], rng: &mut Rng) -> Vec<f64> {
        let mut p = vec![0.0; self.n_params()];
        let last = self.n_convs() - 1;
        for k in 0..last {
            let (kr, _, fan_in, _) = self.layer(k);
            let std = 1.0 / (fan_in as f64).sqrt();
            for v in &mut p[kr] {
                *v = std * rng.truncated_normal();
            }
        }
        let (kr, br, _, _) = self.layer(last);
        for v in &mut p[kr] {
            *v = out_std * rng.normal();
        }
        for (b, &want) in p[br].iter_mut().zip(out_bias) {
            *b = self.head_inverse(want);
        }
        p
    }

    /// The head's input that gives `raw` (clamped inside the bound).
    fn head_inverse(&self, raw: f64) -> f64 {
        let bound = self.head_bound;
        if bound > 0.0 {
            bound * (raw / bound).clamp(-0.999, 0.999).atanh()
        } else {
            raw
        }
    }

    /// Site index of each tap of each site (periodic).
    fn neighbours(&self) -> Neighbours {
        let l = self.size as isize;
        let k = self.kernel as isize;
        let r = (k - 1) / 2;
        (0..self.volume())
            .map(|s| {
                let (y, x) = ((s / self.size) as isize, (s % self.size) as isize);
                (0..k * k)
                    .map(|t| {
                        let (dy, dx) = (t / k - r, t % k - r);
                        ((y + dy).rem_euclid(l) * l + (x + dx).rem_euclid(l)) as usize
                    })
                    .collect()
            })
            .collect()
    }

    /// Gathers each row's neighbourhood: `(n V) x c` to `(n V) x (k^2 c)`.
    fn patches<T: Real>(&self, x: &Array2<T>, nb: &Neighbours) -> Array2<T> {
        let (rows, c) = x.dim();
        let v = self.volume();
        let mut out = Array2::zeros((rows, self.taps() * c));
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

    /// The adjoint of [`ConvShape::patches`]: scatters `(n V) x (k^2 c)` back to `(n V) x c`.
    fn scatter<T: Real>(&self, p_bar: &Array2<T>, c: usize, nb: &Neighbours) -> Array2<T> {
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

    /// `bias + K * x` for convolution `k`, added into `out`.
    fn conv<T: Real>(
        &self,
        params: &[T],
        k: usize,
        x: &Array2<T>,
        nb: &Neighbours,
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
        let act = |h: &Array2<T>| h.mapv(|v| self.activation.apply(v));
        let mut hidden = Vec::with_capacity(self.hidden.len());
        let mut acts = Vec::with_capacity(self.hidden.len());
        let mut h = Array2::zeros((rows, self.hidden[0]));
        self.conv(params, 0, &input, &nb, &mut h);
        // the value the output convolution reads
        let last = if self.residual {
            for k in 1..self.hidden.len() {
                let a = act(&h);
                let mut next = h.clone();
                self.conv(params, k, &a, &nb, &mut next);
                hidden.push(h);
                acts.push(a);
                h = next;
            }
            hidden.push(h.clone());
            h
        } else {
            for k in 1..=self.hidden.len() {
                let a = act(&h);
                hidden.push(h);
                if k < self.hidden.len() {
                    h = Array2::zeros((rows, self.hidden[k]));
                    self.conv(params, k, &a, &nb, &mut h);
                } else {
                    h = Array2::zeros((0, 0));
                }
                acts.push(a);
            }
            acts[acts.len() - 1].clone()
        };
        let mut out = Array2::zeros((rows, self.c_out));
        self.conv(params, self.n_convs() - 1, &last, &nb, &mut out);
        let head = (self.head_bound > 0.0).then(|| {
            let b = T::c(self.head_bound);
            let t = out.mapv(|v| (v / b).tanh());
            out = t.mapv(|v| v * b);
            t
        });
        (
            out,
            ConvCache {
                input,
                hidden,
                acts,
                head,
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
        let out_bar = match &cache.head {
            // d(B tanh(u / B))/du = 1 - tanh^2
            Some(t) => {
                let mut o = out_bar.to_owned();
                ndarray::Zip::from(&mut o)
                    .and(t)
                    .for_each(|ob, &tv| *ob *= T::one() - tv * tv);
                o
            }
            None => out_bar.to_owned(),
        };
        let last = self.n_convs() - 1;
        let n_hidden = self.hidden.len();
        let d = |x: T| self.activation.derivative(x);
        if self.residual {
            let mut h_bar = self.conv_backward(
                params,
                last,
                &cache.hidden[n_hidden - 1],
                out_bar.view(),
                &nb,
                grad,
            );
            for k in (1..n_hidden).rev() {
                let act_bar =
                    self.conv_backward(params, k, &cache.acts[k - 1], h_bar.view(), &nb, grad);
                // residual block: h_bar(k-1) = h_bar(k) + act_bar * act'(h(k-1))
                ndarray::Zip::from(&mut h_bar)
                    .and(&act_bar)
                    .and(&cache.hidden[k - 1])
                    .for_each(|hb, &ab, &hp| *hb += ab * d(hp));
            }
            self.conv_backward(params, 0, &cache.input, h_bar.view(), &nb, grad)
        } else {
            let mut a_bar = self.conv_backward(
                params,
                last,
                &cache.acts[n_hidden - 1],
                out_bar.view(),
                &nb,
                grad,
            );
            for k in (0..n_hidden).rev() {
                ndarray::Zip::from(&mut a_bar)
                    .and(&cache.hidden[k])
                    .for_each(|ab, &z| *ab *= d(z));
                let x = if k == 0 {
                    &cache.input
                } else {
                    &cache.acts[k - 1]
                };
                a_bar = self.conv_backward(params, k, x, a_bar.view(), &nb, grad);
            }
            a_bar
        }
    }

    /// One convolution backward: grad(K_k) += patches^T out_bar, grad(b_k) +=
    /// column sums; returns the adjoint of its input `x`.
    fn conv_backward<T: Real>(
        &self,
        params: &[T],
        k: usize,
        x: &Array2<T>,
        out_bar: ArrayView2<T>,
        nb: &Neighbours,
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
