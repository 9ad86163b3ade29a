//! Radial flows (math.md section 2): mass moves along rays from a centre `c`.
//!
//! Sampling direction: `w = S (z - c)`, `r = |w|`, `r' = f(r) - f(0)`,
//! `x = c + S^-1 (r'/r) w`, with `S = diag(e^sigma)`. The scalar map `f` is a
//! [`Stack`]; its raw parameters are either stored directly or, in 2D, produced
//! from Fourier features of the ray's angle by a bias-free linear map
//! (the angle-dependent flow of math.md 2.1).
//!
//! Parameter layout: `[centre (d), log_scale (d), body]`, where `body` is the
//! stack's raw values (direct) or the `P x F` weight matrix, row-major (Fourier).

use super::{Adjoint, Flow};
use crate::bijection::{Scalar, Stack};
use crate::real::Real;
use crate::rng::Rng;

/// `r = sqrt(|w|^2 + eps^2)` keeps the centre itself finite (as bijx).
const EPS: f64 = 1e-7;

/// Largest Fourier order of the angle-dependent conditioner.
pub const MAX_ORDER: usize = 16;

/// How the stack's raw parameters are obtained.
#[derive(Clone, Debug, PartialEq)]
pub enum RadialConditioner {
    /// One set of raw parameters for every direction.
    Direct,
    /// 2D only: raw = W [sin(k t)/k (k = 1..order), cos(k t)/k (k = 1..order), 1],
    /// `t = angle + pi`.
    Fourier { order: usize },
}

/// The structure of a radial flow (everything but the parameter values).
#[derive(Clone, Debug, PartialEq)]
pub struct RadialSpec {
    pub dim: usize,
    pub stack: Stack,
    pub conditioner: RadialConditioner,
}

impl RadialSpec {
    /// Number of Fourier features (0 for the direct flow).
    pub fn n_features(&self) -> usize {
        match self.conditioner {
            RadialConditioner::Direct => 0,
            RadialConditioner::Fourier { order } => 2 * order + 1,
        }
    }

    pub fn n_params(&self) -> usize {
        let body = match self.conditioner {
            RadialConditioner::Direct => self.stack.n_raw(),
            RadialConditioner::Fourier { .. } => self.stack.n_raw() * self.n_features(),
        };
        2 * self.dim + body
    }

    /// Checks the structure is one this module can run.
    pub fn validate(&self) -> Result<(), String> {
        if self.dim == 0 {
            return Err("a radial flow needs dimension >= 1".into());
        }
        if self.stack.is_empty() {
            return Err("a radial flow needs a stack of at least one layer".into());
        }
        if let RadialConditioner::Fourier { order } = self.conditioner {
            if self.dim != 2 {
                return Err("the angle-dependent (Fourier) radial flow is 2D only".into());
            }
            if order == 0 || order > MAX_ORDER {
                return Err(format!("the Fourier conditioner needs order 1 to {MAX_ORDER}"));
            }
        }
        Ok(())
    }
}

/// A radial flow with its parameters.
#[derive(Clone, Debug)]
pub struct RadialFlow<T> {
    pub spec: RadialSpec,
    params: Vec<T>,
}

/// Per-thread scratch space for one sample at a time.
struct Work<T> {
    raw: Vec<T>,
    raw_bar: Vec<T>,
    built: Vec<Scalar<T>>,
    trace: Vec<T>,
    trace0: Vec<T>,
    features: Vec<T>,
    w: Vec<T>,
    w_bar: Vec<T>,
    out_bar: Vec<T>,
}

impl<T: Real> RadialFlow<T> {
    /// Default initialization: the given centre (or N(0, 1)), log-scales
    /// N(0, 0.1^2), the stack's default raw values (direct) or weights
    /// N(0, 0.01^2) (Fourier, as bijx).
    pub fn init(spec: RadialSpec, center: Option<&[f64]>, rng: &mut Rng) -> Result<Self, String> {
        spec.validate()?;
        let d = spec.dim;
        let mut p: Vec<f64> = Vec::with_capacity(spec.n_params());
        match center {
            Some(c) if c.len() == d => p.extend_from_slice(c),
            Some(c) => return Err(format!("centre has {} coordinates, flow has {d}", c.len())),
            None => p.extend((0..d).map(|_| rng.normal())),
        }
        p.extend((0..d).map(|_| 0.1 * rng.normal()));
        match spec.conditioner {
            RadialConditioner::Direct => p.extend(spec.stack.default_raw(&mut || rng.normal())),
            RadialConditioner::Fourier { .. } => {
                let n = spec.stack.n_raw() * spec.n_features();
                p.extend((0..n).map(|_| 0.01 * rng.normal()));
            }
        }
        Ok(Self {
            spec,
            params: p.into_iter().map(T::c).collect(),
        })
    }

    /// A flow with the given parameter values (checked for length).
    pub fn from_params(spec: RadialSpec, params: Vec<T>) -> Result<Self, String> {
        spec.validate()?;
        if params.len() != spec.n_params() {
            return Err(format!(
                "radial flow expects {} parameters, got {}",
                spec.n_params(),
                params.len()
            ));
        }
        Ok(Self { spec, params })
    }

    pub fn center(&self) -> &[T] {
        &self.params[..self.spec.dim]
    }

    pub fn log_scale(&self) -> &[T] {
        &self.params[self.spec.dim..2 * self.spec.dim]
    }

    fn body(&self) -> &[T] {
        &self.params[2 * self.spec.dim..]
    }

    fn work(&self) -> Work<T> {
        let p = self.spec.stack.n_raw();
        let k = self.spec.stack.len();
        let mut built = Vec::with_capacity(k);
        if self.spec.conditioner == RadialConditioner::Direct {
            self.spec.stack.build(self.body(), &mut built);
        }
        Work {
            raw: vec![T::zero(); p],
            raw_bar: vec![T::zero(); p],
            built,
            trace: vec![T::zero(); k],
            trace0: vec![T::zero(); k],
            features: vec![T::zero(); self.spec.n_features()],
            w: vec![T::zero(); self.spec.dim],
            w_bar: vec![T::zero(); self.spec.dim],
            out_bar: vec![T::zero(); self.spec.dim],
        }
    }

    /// Fourier features of direction `u` (2D) into `out`; returns the angle t.
    fn fourier(order: usize, u: &[T], out: &mut [T]) -> T {
        let t = u[1].atan2(u[0]) + T::c(std::f64::consts::PI);
        for k in 1..=order {
            let kt = T::c(k as f64) * t;
            let inv_k = T::c(1.0 / k as f64);
            out[k - 1] = kt.sin() * inv_k;
            out[order + k - 1] = kt.cos() * inv_k;
        }
        out[2 * order] = T::one();
        t
    }

    /// Builds the per-direction stack for unit vector `u` (Fourier only).
    fn condition(&self, u: &[T], work: &mut Work<T>) {
        if let RadialConditioner::Fourier { order } = self.spec.conditioner {
            Self::fourier(order, u, &mut work.features);
            let nf = work.features.len();
            for (p, raw) in work.raw.iter_mut().enumerate() {
                let row = &self.body()[p * nf..(p + 1) * nf];
                *raw = row.iter().zip(&work.features).map(|(&w, &f)| w * f).sum();
            }
            self.spec.stack.build(&work.raw, &mut work.built);
        }
    }

    /// Backpropagates the stack's raw adjoints into the body's gradient and
    /// returns the adjoint of the direction's angle t (0 for the direct flow).
    fn condition_backward(&self, u: &[T], work: &Work<T>, body_grad: &mut [T]) -> T {
        match self.spec.conditioner {
            RadialConditioner::Direct => {
                for (g, &b) in body_grad.iter_mut().zip(&work.raw_bar) {
                    *g += b;
                }
                T::zero()
            }
            RadialConditioner::Fourier { order } => {
                let nf = work.features.len();
                let t = u[1].atan2(u[0]) + T::c(std::f64::consts::PI);
                // d features / dt: cos(kt) for the sines, -sin(kt) for the cosines
                let mut dphi = [T::zero(); 2 * MAX_ORDER];
                for k in 1..=order {
                    let kt = T::c(k as f64) * t;
                    dphi[k - 1] = kt.cos();
                    dphi[order + k - 1] = -kt.sin();
                }
                let body = self.body();
                let mut t_bar = T::zero();
                for (p, &rb) in work.raw_bar.iter().enumerate() {
                    let row = &mut body_grad[p * nf..(p + 1) * nf];
                    for (g, &f) in row.iter_mut().zip(&work.features) {
                        *g += rb * f;
                    }
                    let wrow = &body[p * nf..p * nf + 2 * order];
                    let dot: T = wrow.iter().zip(&dphi[..2 * order]).map(|(&w, &d)| w * d).sum();
                    t_bar += rb * dot;
                }
                t_bar
            }
        }
    }

    /// One sample of the density direction, with optional reverse mode.
    fn z_from_x_one(
        &self,
        x: &[T],
        z: &mut [T],
        work: &mut Work<T>,
        backward: Option<(&mut dyn FnMut(&[T], T, &mut [T]) -> T, &mut [T])>,
    ) -> T {
        let d = self.spec.dim;
        let (c, sigma) = (self.center(), self.log_scale());
        let eps2 = T::c(EPS * EPS);
        let mut r2 = eps2;
        for j in 0..d {
            work.w[j] = sigma[j].exp() * (x[j] - c[j]);
            r2 += work.w[j] * work.w[j];
        }
        let r_in = r2.sqrt(); // r' (data side)
        let inv_r_in = T::one() / r_in;
        let u: [T; 2] = if d == 2 {
            [work.w[0] * inv_r_in, work.w[1] * inv_r_in]
        } else {
            [T::zero(); 2]
        };
        self.condition(&u, work);
        let f0 = Stack::x_from_z_value_trace(&work.built, T::zero(), &mut work.trace0);
        let (r, logd) = Stack::z_from_x_trace(&work.built, r_in + f0, &mut work.trace);
        let ratio = r * inv_r_in;
        for j in 0..d {
            z[j] = c[j] + (-sigma[j]).exp() * ratio * work.w[j];
        }
        let dm1 = T::c((d - 1) as f64);
        let ld = -logd + dm1 * ratio.ln();
        let Some((adjoint, grad)) = backward else {
            return ld;
        };
        let mut z_bar = std::mem::take(&mut work.out_bar);
        let mut w_bar = std::mem::take(&mut work.w_bar);
        z_bar.iter_mut().for_each(|v| *v = T::zero());
        let ld_bar = adjoint(z, ld, &mut z_bar);
        let (g_c, rest) = grad.split_at_mut(d);
        let (g_sigma, g_body) = rest.split_at_mut(d);
        let mut ratio_bar = ld_bar * dm1 / ratio;
        for j in 0..d {
            g_c[j] += z_bar[j];
            let q = (-sigma[j]).exp() * z_bar[j];
            g_sigma[j] -= q * ratio * work.w[j];
            ratio_bar += q * work.w[j];
            w_bar[j] = ratio * q;
        }
        let r_bar = ratio_bar * inv_r_in;
        let mut r_in_bar = -ratio_bar * r * inv_r_in * inv_r_in;
        work.raw_bar.iter_mut().for_each(|v| *v = T::zero());
        let y_bar = self
            .spec
            .stack
            .z_from_x_backward(&work.built, &work.trace, r_in + f0, r_bar, ld_bar, &mut work.raw_bar);
        r_in_bar += y_bar;
        self.spec
            .stack
            .x_from_z_backward(&work.built, &work.trace0, f0, y_bar, T::zero(), &mut work.raw_bar);
        let t_bar = self.condition_backward(&u, work, g_body);
        if d == 2 {
            // t = atan2(u1, u0): dt/du = (-u1, u0); u = w / r_in.
            let u_bar = [-u[1] * t_bar, u[0] * t_bar];
            let dot = u_bar[0] * u[0] + u_bar[1] * u[1];
            for j in 0..2 {
                w_bar[j] += (u_bar[j] - dot * u[j]) * inv_r_in;
            }
        }
        for j in 0..d {
            w_bar[j] += r_in_bar * work.w[j] * inv_r_in;
            g_c[j] -= sigma[j].exp() * w_bar[j];
            g_sigma[j] += w_bar[j] * work.w[j];
        }
        work.out_bar = z_bar;
        work.w_bar = w_bar;
        ld
    }

    /// The sampling direction of one point with the given per-direction stack
    /// layers (`built`): the ray geometry alone, for a conditioner of one's own.
    pub fn x_from_z_with_layers(&self, built: &[Scalar<T>], z: &[T], x: &mut [T]) -> T {
        let d = self.spec.dim;
        let (c, sigma) = (self.center(), self.log_scale());
        let scaled: Vec<T> = (0..d).map(|j| sigma[j].exp() * (z[j] - c[j])).collect();
        let r = (scaled.iter().map(|&v| v * v).sum::<T>() + T::c(EPS * EPS)).sqrt();
        let (f0, _) = Stack::x_from_z(built, T::zero());
        let (f_r, logd) = Stack::x_from_z(built, r);
        let ratio = (f_r - f0) / r;
        for j in 0..d {
            x[j] = c[j] + (-sigma[j]).exp() * ratio * scaled[j];
        }
        logd + T::c((d - 1) as f64) * ratio.ln()
    }

    /// One sample of the sampling direction, with optional reverse mode.
    fn x_from_z_one(
        &self,
        z: &[T],
        x: &mut [T],
        work: &mut Work<T>,
        backward: Option<(&mut dyn FnMut(&[T], T, &mut [T]) -> T, &mut [T])>,
    ) -> T {
        let d = self.spec.dim;
        let (c, sigma) = (self.center(), self.log_scale());
        let mut r2 = T::c(EPS * EPS);
        for j in 0..d {
            work.w[j] = sigma[j].exp() * (z[j] - c[j]);
            r2 += work.w[j] * work.w[j];
        }
        let r = r2.sqrt();
        let inv_r = T::one() / r;
        let u: [T; 2] = if d == 2 {
            [work.w[0] * inv_r, work.w[1] * inv_r]
        } else {
            [T::zero(); 2]
        };
        self.condition(&u, work);
        let f0 = Stack::x_from_z_value_trace(&work.built, T::zero(), &mut work.trace0);
        let (f_r, logd) = Stack::x_from_z_trace(&work.built, r, &mut work.trace);
        let r_out = f_r - f0;
        let ratio = r_out * inv_r;
        for j in 0..d {
            x[j] = c[j] + (-sigma[j]).exp() * ratio * work.w[j];
        }
        let dm1 = T::c((d - 1) as f64);
        let ld = logd + dm1 * ratio.ln();
        let Some((adjoint, grad)) = backward else {
            return ld;
        };
        let mut x_bar = std::mem::take(&mut work.out_bar);
        let mut w_bar = std::mem::take(&mut work.w_bar);
        x_bar.iter_mut().for_each(|v| *v = T::zero());
        let ld_bar = adjoint(x, ld, &mut x_bar);
        let (g_c, rest) = grad.split_at_mut(d);
        let (g_sigma, g_body) = rest.split_at_mut(d);
        let mut ratio_bar = ld_bar * dm1 / ratio;
        for j in 0..d {
            g_c[j] += x_bar[j];
            let q = (-sigma[j]).exp() * x_bar[j];
            g_sigma[j] -= q * ratio * work.w[j];
            ratio_bar += q * work.w[j];
            w_bar[j] = ratio * q;
        }
        let r_out_bar = ratio_bar * inv_r;
        let mut r_bar = -ratio_bar * r_out * inv_r * inv_r;
        work.raw_bar.iter_mut().for_each(|v| *v = T::zero());
        r_bar += self
            .spec
            .stack
            .x_from_z_backward(&work.built, &work.trace, f_r, r_out_bar, ld_bar, &mut work.raw_bar);
        self.spec
            .stack
            .x_from_z_backward(&work.built, &work.trace0, f0, -r_out_bar, T::zero(), &mut work.raw_bar);
        let t_bar = self.condition_backward(&u, work, g_body);
        if d == 2 {
            let u_bar = [-u[1] * t_bar, u[0] * t_bar];
            let dot = u_bar[0] * u[0] + u_bar[1] * u[1];
            for j in 0..2 {
                w_bar[j] += (u_bar[j] - dot * u[j]) * inv_r;
            }
        }
        for j in 0..d {
            w_bar[j] += r_bar * work.w[j] * inv_r;
            g_c[j] -= sigma[j].exp() * w_bar[j];
            g_sigma[j] += w_bar[j] * work.w[j];
        }
        work.out_bar = x_bar;
        work.w_bar = w_bar;
        ld
    }

    /// The learned radius map for direction `angle` (2D): the stack at that
    /// direction, for plotting `r -> f(r) - f(0)`.
    pub fn radius_map(&self, angle: T, radii: &[T]) -> Vec<T> {
        let mut work = self.work();
        let u = [angle.cos(), angle.sin()];
        self.condition(&u, &mut work);
        let (f0, _) = Stack::x_from_z(&work.built, T::zero());
        radii
            .iter()
            .map(|&r| Stack::x_from_z(&work.built, r).0 - f0)
            .collect()
    }

    /// The stack's constrained parameters for direction `angle` (the direct
    /// flow ignores the angle), one vector per layer.
    pub fn layer_params(&self, angle: T) -> Vec<Vec<f64>> {
        let mut work = self.work();
        self.condition(&[angle.cos(), angle.sin()], &mut work);
        work.built.iter().map(|l| l.constrained()).collect()
    }
}

impl<T: Real> Flow<T> for RadialFlow<T> {
    fn dim(&self) -> usize {
        self.spec.dim
    }

    fn params(&self) -> &[T] {
        &self.params
    }

    fn params_mut(&mut self) -> &mut [T] {
        &mut self.params
    }

    fn x_from_z(&self, z: &[T], x: &mut [T], log_det: &mut [T]) {
        let d = self.spec.dim;
        let mut work = self.work();
        for (i, ld) in log_det.iter_mut().enumerate() {
            *ld = self.x_from_z_one(&z[i * d..(i + 1) * d], &mut x[i * d..(i + 1) * d], &mut work, None);
        }
    }

    fn z_from_x(&self, x: &[T], z: &mut [T], log_det: &mut [T]) {
        let d = self.spec.dim;
        let mut work = self.work();
        for (i, ld) in log_det.iter_mut().enumerate() {
            *ld = self.z_from_x_one(&x[i * d..(i + 1) * d], &mut z[i * d..(i + 1) * d], &mut work, None);
        }
    }

    fn z_from_x_grad(&self, x: &[T], adjoint: &Adjoint<T>, z: &mut [T], log_det: &mut [T], grad: &mut [T]) {
        let d = self.spec.dim;
        let mut work = self.work();
        for (i, ld) in log_det.iter_mut().enumerate() {
            let mut a = |p: &[T], l: T, bar: &mut [T]| adjoint(i, p, l, bar);
            *ld = self.z_from_x_one(
                &x[i * d..(i + 1) * d],
                &mut z[i * d..(i + 1) * d],
                &mut work,
                Some((&mut a, &mut *grad)),
            );
        }
    }

    fn x_from_z_grad(&self, z: &[T], adjoint: &Adjoint<T>, x: &mut [T], log_det: &mut [T], grad: &mut [T]) {
        let d = self.spec.dim;
        let mut work = self.work();
        for (i, ld) in log_det.iter_mut().enumerate() {
            let mut a = |p: &[T], l: T, bar: &mut [T]| adjoint(i, p, l, bar);
            *ld = self.x_from_z_one(
                &z[i * d..(i + 1) * d],
                &mut x[i * d..(i + 1) * d],
                &mut work,
                Some((&mut a, &mut *grad)),
            );
        }
    }
}
