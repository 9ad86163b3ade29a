//! Radial flows (docs/mathematics.md, section 4): mass moves along rays from a centre `c`.
//!
//! Sampling direction: `w = S (z - c)`, `r = |w|`, `r' = f(r) - f(0)`,
//! `x = c + S^-1 (r'/r) w`, with `S = diag(e^sigma)`. The scalar map `f` is a
//! [`Stack`]; its raw parameters are either stored directly or, in 2D, produced
//! from Fourier features of the ray's angle by a bias-free linear map
//! (the angle-dependent flow of docs/mathematics.md, section 4.1).
//!
//! Parameter layout: `[centre (d), log_scale (d), body]`, where `body` is the
//! stack's raw values (direct) or the `P x F` weight matrix stored feature-major,
//! i.e. as its `F x P` transpose, so that every conditioner operation runs along
//! rows of length P (Fourier).

use super::{Adjoint, Flow};
use crate::bijection::{Scalar, Stack};
use crate::real::Real;
use crate::rng::Rng;

/// `r = sqrt(|w|^2 + eps^2)` keeps the centre itself finite (as bijx).
const EPS: f64 = 1e-7;

/// Whether `value + small` (or `value - (value + small)`) loses more than eight
/// bits of `small` (float32: 1.5e-5 relative), so the radius should go through
/// the chain as differences.
#[inline]
fn needs_differences<T: Real>(value: T, small: T) -> bool {
    value.abs() > T::c(256.0) * small.abs()
}

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
        if !(1..=super::limits::MAX_DIM).contains(&self.dim) {
            return Err(format!(
                "a radial flow needs dimension 1 to {}",
                super::limits::MAX_DIM
            ));
        }
        if self.stack.is_empty() {
            return Err("a radial flow needs a stack of at least one layer".into());
        }
        if let RadialConditioner::Fourier { order } = self.conditioner {
            if self.dim != 2 {
                return Err("the angle-dependent (Fourier) radial flow is 2D only".into());
            }
            if order == 0 || order > MAX_ORDER {
                return Err(format!(
                    "the Fourier conditioner needs order 1 to {MAX_ORDER}"
                ));
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

/// A block's adjoint callback (lane, point, log-det, adjoint out) and the gradient to add into.
type Backward<'a, T> = (
    &'a mut dyn FnMut(usize, &[T], T, &mut [T]) -> T,
    &'a mut [T],
);

/// One direction on one block: (flow, input, output, log-det, scratch, backward).
type BlockFn<T> =
    fn(&RadialFlow<T>, &[T], &mut [T], &mut [T], &mut Work<T>, Option<Backward<'_, T>>);

/// Samples processed together: their scalar chains run in lockstep.
const LANES: usize = 8;

/// Scratch space for a block of up to [`LANES`] samples.
struct Work<T> {
    lanes: usize,
    /// per lane: `S (p - c)` (d values), its norm, its direction (2D)
    w: Vec<T>,
    r_in: [T; LANES],
    u: [[T; 2]; LANES],
    /// per lane: the stack's layers for that lane's direction
    built: Vec<Vec<Scalar<T>>>,
    raw: Vec<T>,
    raw_bar: Vec<T>,
    features: Vec<T>,
    /// traces of the f(0) chains and of the main chains, lanes x K
    trace0: Vec<T>,
    trace: Vec<T>,
    f0: [T; LANES],
    chain_in: [T; LANES],
    chain_out: [T; LANES],
    /// f(r) - f(0) (sampling direction)
    r_out: [T; LANES],
    logd: [T; LANES],
    /// adjoints
    out_bar: Vec<T>,
    w_bar: Vec<T>,
    ld_bar: [T; LANES],
    bar: [T; LANES],
    f0_bar: [T; LANES],
    zeros: [T; LANES],
    /// the chain at 0 of a direct flow (the same for every sample)
    shared_f0: T,
    shared_trace0: Vec<T>,
}

impl<T: Real> RadialFlow<T> {
    /// Default initialization: the given centre (or N(0, 1)) and log-scales (or
    /// N(0, 0.1^2)), the stack's default raw values (direct) or weights
    /// N(0, 0.01^2) (Fourier, as bijx).
    pub fn init(
        spec: RadialSpec,
        center: Option<&[f64]>,
        log_scale: Option<&[f64]>,
        rng: &mut Rng,
    ) -> Result<Self, String> {
        spec.validate()?;
        let d = spec.dim;
        let mut p: Vec<f64> = Vec::with_capacity(spec.n_params());
        for (given, what, spread) in [(center, "centre", 1.0), (log_scale, "log-scale", 0.1)] {
            match given {
                Some(v) if v.len() == d => p.extend_from_slice(v),
                Some(v) => {
                    return Err(format!(
                        "the {what} has {} coordinates, the flow has {d}",
                        v.len()
                    ));
                }
                None => p.extend((0..d).map(|_| spread * rng.normal())),
            }
        }
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
        let d = self.spec.dim;
        let mut shared = Vec::with_capacity(k);
        if self.spec.conditioner == RadialConditioner::Direct {
            self.spec.stack.build(self.body(), &mut shared);
        }
        let z = T::zero();
        let mut shared_trace0 = vec![z; k];
        let shared_f0 = if self.spec.conditioner == RadialConditioner::Direct {
            Stack::x_from_z_value_trace(&shared, T::zero(), &mut shared_trace0)
        } else {
            z
        };
        Work {
            lanes: 0,
            w: vec![z; LANES * d],
            r_in: [z; LANES],
            u: [[z; 2]; LANES],
            built: vec![shared; LANES],
            raw: vec![z; p],
            raw_bar: vec![z; LANES * p],
            features: vec![z; LANES * self.spec.n_features()],
            trace0: vec![z; LANES * k],
            trace: vec![z; LANES * k],
            f0: [z; LANES],
            chain_in: [z; LANES],
            chain_out: [z; LANES],
            r_out: [z; LANES],
            logd: [z; LANES],
            out_bar: vec![z; LANES * d],
            w_bar: vec![z; LANES * d],
            ld_bar: [z; LANES],
            bar: [z; LANES],
            f0_bar: [z; LANES],
            zeros: [z; LANES],
            shared_f0,
            shared_trace0,
        }
    }

    /// Fourier features of direction `u` (2D) into `out`.
    fn fourier(order: usize, u: &[T], out: &mut [T]) {
        let t = u[1].atan2(u[0]) + T::c(std::f64::consts::PI);
        for k in 1..=order {
            let kt = T::c(k as f64) * t;
            let inv_k = T::c(1.0 / k as f64);
            out[k - 1] = kt.sin() * inv_k;
            out[order + k - 1] = kt.cos() * inv_k;
        }
        out[2 * order] = T::one();
    }

    /// Phase 1 of both directions: for each lane's point `p`, `w = S (p - c)`,
    /// its norm and direction, and (Fourier) that direction's stack layers.
    fn geometry(&self, points: &[T], work: &mut Work<T>) {
        let d = self.spec.dim;
        let (c, sigma) = (self.center(), self.log_scale());
        work.lanes = points.len() / d;
        for lane in 0..work.lanes {
            let w = &mut work.w[lane * d..(lane + 1) * d];
            let mut r2 = T::c(EPS * EPS);
            for j in 0..d {
                w[j] = sigma[j].exp() * (points[lane * d + j] - c[j]);
                r2 += w[j] * w[j];
            }
            let r = r2.sqrt();
            work.r_in[lane] = r;
            if d == 2 {
                work.u[lane] = [w[0] / r, w[1] / r];
            }
            if let RadialConditioner::Fourier { order } = self.spec.conditioner {
                let nf = 2 * order + 1;
                let features = &mut work.features[lane * nf..(lane + 1) * nf];
                Self::fourier(order, &work.u[lane], features);
                // raw = W features, W stored feature-major (one row of P per feature)
                let n_raw = work.raw.len();
                work.raw.iter_mut().for_each(|r| *r = T::zero());
                for (f, &phi) in features.iter().enumerate() {
                    let column = &self.body()[f * n_raw..(f + 1) * n_raw];
                    for (r, &w) in work.raw.iter_mut().zip(column) {
                        *r += w * phi;
                    }
                }
                self.spec.stack.build(&work.raw, &mut work.built[lane]);
            }
            work.f0[lane] = T::zero();
        }
    }

    /// The f(0) chains of every lane (f~(r) = f(r) - f(0)).
    fn offsets(&self, work: &mut Work<T>) {
        let n = work.lanes;
        let k = self.spec.stack.len();
        if self.spec.conditioner == RadialConditioner::Direct {
            // one stack for every direction: the chain at 0 is the same for all
            for lane in 0..n {
                work.f0[lane] = work.shared_f0;
                work.trace0[lane * k..(lane + 1) * k].copy_from_slice(&work.shared_trace0);
            }
            return;
        }
        Stack::x_from_z_value_lanes(
            &work.built[..n],
            &mut work.f0[..n],
            &mut work.trace0[..n * k],
        );
    }

    /// Backward through the f(0) chains, given each lane's adjoint of f(0). With
    /// one stack for every direction the adjoints add up and one pass serves all
    /// lanes (its raw adjoints land in lane 0's slot, which sums like any other).
    fn offsets_backward(&self, work: &mut Work<T>, mut f0_bar: [T; LANES]) {
        let n = work.lanes;
        let k = self.spec.stack.len();
        let lanes = if self.spec.conditioner == RadialConditioner::Direct {
            f0_bar[0] = f0_bar[..n].iter().copied().sum();
            1
        } else {
            n
        };
        self.spec.stack.x_from_z_backward_lanes(
            &work.built[..lanes],
            &work.trace0[..lanes * k],
            &work.f0[..lanes],
            &mut f0_bar[..lanes],
            &work.zeros[..lanes],
            &mut work.raw_bar,
        );
    }

    /// Last phase of both directions' backward passes: the stack's raw adjoints
    /// into the body's gradient, the direction's adjoint into `w_bar`, then
    /// `w = S (p - c)` into the centre and log-scale gradients.
    fn geometry_backward(&self, work: &mut Work<T>, grad: &mut [T]) {
        let d = self.spec.dim;
        let p = self.spec.stack.n_raw();
        let (c_len, sigma) = (d, self.log_scale());
        let (g_c, rest) = grad.split_at_mut(c_len);
        let (g_sigma, g_body) = rest.split_at_mut(d);
        for lane in 0..work.lanes {
            let raw_bar = &work.raw_bar[lane * p..(lane + 1) * p];
            let w = &work.w[lane * d..(lane + 1) * d];
            let w_bar = &mut work.w_bar[lane * d..(lane + 1) * d];
            let r = work.r_in[lane];
            match self.spec.conditioner {
                RadialConditioner::Direct => {
                    for (g, &b) in g_body.iter_mut().zip(raw_bar) {
                        *g += b;
                    }
                }
                RadialConditioner::Fourier { order } => {
                    let nf = 2 * order + 1;
                    let u = work.u[lane];
                    let features = &work.features[lane * nf..(lane + 1) * nf];
                    let t = u[1].atan2(u[0]) + T::c(std::f64::consts::PI);
                    // d features / dt: cos(kt) for the sines, -sin(kt) for the cosines
                    let mut dphi = [T::zero(); 2 * MAX_ORDER];
                    for k in 1..=order {
                        let kt = T::c(k as f64) * t;
                        dphi[k - 1] = kt.cos();
                        dphi[order + k - 1] = -kt.sin();
                    }
                    // grad(W) += raw_bar features^T; t_bar = raw_bar . (W dphi)
                    let body = self.body();
                    let mut t_bar = T::zero();
                    for f in 0..nf {
                        let g_row = &mut g_body[f * p..(f + 1) * p];
                        for (g, &rb) in g_row.iter_mut().zip(raw_bar) {
                            *g += rb * features[f];
                        }
                        if f < 2 * order {
                            let w_row = &body[f * p..(f + 1) * p];
                            let dot = crate::real::dot(w_row, raw_bar);
                            t_bar += dot * dphi[f];
                        }
                    }
                    // t = atan2(u1, u0): dt/du = (-u1, u0); u = w / r.
                    let u_bar = [-u[1] * t_bar, u[0] * t_bar];
                    let dot = u_bar[0] * u[0] + u_bar[1] * u[1];
                    for j in 0..2 {
                        w_bar[j] += (u_bar[j] - dot * u[j]) / r;
                    }
                }
            }
            for j in 0..d {
                g_c[j] -= sigma[j].exp() * w_bar[j];
                g_sigma[j] += w_bar[j] * w[j];
            }
        }
        for v in &mut work.raw_bar[..work.lanes * p] {
            *v = T::zero();
        }
    }

    /// Places a lane's output `c + S^-1 ratio w`.
    fn place(&self, work: &Work<T>, lane: usize, ratio: T, out: &mut [T]) {
        let d = self.spec.dim;
        let (c, sigma) = (self.center(), self.log_scale());
        for j in 0..d {
            out[j] = c[j] + (-sigma[j]).exp() * ratio * work.w[lane * d + j];
        }
    }

    /// Adjoint of `out = c + S^-1 ratio w`: into the centre and log-scale
    /// gradients and `w_bar`; returns the adjoint of `ratio`.
    fn place_backward(&self, work: &mut Work<T>, lane: usize, ratio: T, grad: &mut [T]) -> T {
        let d = self.spec.dim;
        let sigma = self.log_scale();
        let mut ratio_bar = T::zero();
        for j in 0..d {
            let ob = work.out_bar[lane * d + j];
            let w = work.w[lane * d + j];
            grad[j] += ob;
            let q = (-sigma[j]).exp() * ob;
            grad[d + j] -= q * ratio * w;
            ratio_bar += q * w;
            work.w_bar[lane * d + j] = ratio * q;
        }
        ratio_bar
    }

    /// The density direction on a block of at most [`LANES`] points.
    fn z_from_x_block(
        &self,
        x: &[T],
        z: &mut [T],
        log_det: &mut [T],
        work: &mut Work<T>,
        backward: Option<Backward<'_, T>>,
    ) {
        let d = self.spec.dim;
        let k = self.spec.stack.len();
        self.geometry(x, work);
        self.offsets(work);
        let n = work.lanes;
        for lane in 0..n {
            work.chain_in[lane] = work.r_in[lane] + work.f0[lane];
            work.chain_out[lane] = work.chain_in[lane];
        }
        Stack::z_from_x_lanes(
            &work.built[..n],
            &mut work.chain_out[..n],
            &mut work.logd[..n],
            &mut work.trace[..n * k],
        );
        for lane in 0..n {
            // Near the centre r_in + f(0) drops r_in's low bits: redo the chain as
            // differences from the chain at 0.
            if needs_differences(work.f0[lane], work.r_in[lane]) {
                work.chain_out[lane] = Stack::z_from_x_diff(
                    &work.built[lane],
                    &work.trace0[lane * k..(lane + 1) * k],
                    work.f0[lane],
                    work.r_in[lane],
                    &mut work.trace[lane * k..(lane + 1) * k],
                );
            }
        }
        let dm1 = T::c((d - 1) as f64);
        for lane in 0..n {
            let ratio = work.chain_out[lane] / work.r_in[lane];
            self.place(work, lane, ratio, &mut z[lane * d..(lane + 1) * d]);
            log_det[lane] = -work.logd[lane] + dm1 * ratio.ln();
        }
        let Some((adjoint, grad)) = backward else {
            return;
        };
        for lane in 0..n {
            let r_in = work.r_in[lane];
            let r = work.chain_out[lane];
            let ratio = r / r_in;
            let ob = &mut work.out_bar[lane * d..(lane + 1) * d];
            ob.iter_mut().for_each(|v| *v = T::zero());
            let ld_bar = adjoint(lane, &z[lane * d..(lane + 1) * d], log_det[lane], ob);
            work.ld_bar[lane] = ld_bar;
            let ratio_bar = self.place_backward(work, lane, ratio, grad) + ld_bar * dm1 / ratio;
            // ratio = r / r_in: r's adjoint starts the chain's backward pass;
            // r_in's direct part waits in f0_bar until the chain returns.
            work.bar[lane] = ratio_bar / r_in;
            work.f0_bar[lane] = -ratio_bar * r / (r_in * r_in);
        }
        // r = f^-1(r_in + f0): its input adjoint feeds both r_in and f0.
        self.spec.stack.z_from_x_backward_lanes(
            &work.built[..n],
            &work.trace[..n * k],
            &work.chain_in[..n],
            &mut work.bar[..n],
            &work.ld_bar[..n],
            &mut work.raw_bar,
        );
        self.offsets_backward(work, work.bar);
        for lane in 0..n {
            let r_in_bar = work.f0_bar[lane] + work.bar[lane];
            for j in 0..d {
                work.w_bar[lane * d + j] += r_in_bar * work.w[lane * d + j] / work.r_in[lane];
            }
        }
        self.geometry_backward(work, grad);
    }

    /// The sampling direction on a block of at most [`LANES`] points.
    fn x_from_z_block(
        &self,
        z: &[T],
        x: &mut [T],
        log_det: &mut [T],
        work: &mut Work<T>,
        backward: Option<Backward<'_, T>>,
    ) {
        let d = self.spec.dim;
        let k = self.spec.stack.len();
        self.geometry(z, work);
        self.offsets(work);
        let n = work.lanes;
        work.chain_out[..n].copy_from_slice(&work.r_in[..n]);
        Stack::x_from_z_lanes(
            &work.built[..n],
            &mut work.chain_out[..n],
            &mut work.logd[..n],
            &mut work.trace[..n * k],
        );
        for lane in 0..n {
            let f0 = work.f0[lane];
            let mut r_out = work.chain_out[lane] - f0;
            // f(r) - f(0) cancels when r is small against f(0): take the
            // difference layer by layer instead.
            if needs_differences(f0, r_out) {
                r_out = Stack::x_from_z_diff(
                    &work.built[lane],
                    &work.trace0[lane * k..(lane + 1) * k],
                    f0,
                    work.r_in[lane],
                );
            }
            work.r_out[lane] = r_out;
        }
        let dm1 = T::c((d - 1) as f64);
        for lane in 0..n {
            let ratio = work.r_out[lane] / work.r_in[lane];
            self.place(work, lane, ratio, &mut x[lane * d..(lane + 1) * d]);
            log_det[lane] = work.logd[lane] + dm1 * ratio.ln();
        }
        let Some((adjoint, grad)) = backward else {
            return;
        };
        for lane in 0..n {
            let r = work.r_in[lane];
            let r_out = work.r_out[lane];
            let ratio = r_out / r;
            let ob = &mut work.out_bar[lane * d..(lane + 1) * d];
            ob.iter_mut().for_each(|v| *v = T::zero());
            let ld_bar = adjoint(lane, &x[lane * d..(lane + 1) * d], log_det[lane], ob);
            work.ld_bar[lane] = ld_bar;
            let ratio_bar = self.place_backward(work, lane, ratio, grad) + ld_bar * dm1 / ratio;
            // ratio = (f(r) - f(0)) / r
            work.bar[lane] = ratio_bar / r;
            work.f0_bar[lane] = -ratio_bar / r;
            work.chain_in[lane] = -ratio_bar * r_out / (r * r);
        }
        self.spec.stack.x_from_z_backward_lanes(
            &work.built[..n],
            &work.trace[..n * k],
            &work.chain_out[..n],
            &mut work.bar[..n],
            &work.ld_bar[..n],
            &mut work.raw_bar,
        );
        self.offsets_backward(work, work.f0_bar);
        for lane in 0..n {
            let r_bar = work.chain_in[lane] + work.bar[lane];
            for j in 0..d {
                work.w_bar[lane * d + j] += r_bar * work.w[lane * d + j] / work.r_in[lane];
            }
        }
        self.geometry_backward(work, grad);
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

    /// Runs `block` over the batch in blocks of [`LANES`] points.
    fn run_blocks(
        &self,
        input: &[T],
        output: &mut [T],
        log_det: &mut [T],
        mut grad: Option<(&Adjoint<T>, &mut [T])>,
        block: BlockFn<T>,
    ) {
        let d = self.spec.dim;
        let mut work = self.work();
        for (b, ((inp, out), ld)) in input
            .chunks(LANES * d)
            .zip(output.chunks_mut(LANES * d))
            .zip(log_det.chunks_mut(LANES))
            .enumerate()
        {
            match grad.as_mut() {
                None => block(self, inp, out, ld, &mut work, None),
                Some((adjoint, g)) => {
                    let mut a = |lane: usize, p: &[T], l: T, bar: &mut [T]| {
                        adjoint(b * LANES + lane, p, l, bar)
                    };
                    block(self, inp, out, ld, &mut work, Some((&mut a, &mut **g)));
                }
            }
        }
    }

    /// The stack's layers for direction `angle` (2D; the direct flow ignores it).
    fn layers_at(&self, angle: T) -> Vec<Scalar<T>> {
        let mut work = self.work();
        let sigma = self.log_scale();
        // The point whose S (p - c) points along `angle`.
        let mut point = self.center().to_vec();
        if self.spec.dim == 2 {
            point[0] += angle.cos() * (-sigma[0]).exp();
            point[1] += angle.sin() * (-sigma[1]).exp();
        } else {
            point[0] += T::one();
        }
        self.geometry(&point, &mut work);
        work.built.swap_remove(0)
    }

    /// The learned radius map `r -> f(r) - f(0)` for direction `angle` (2D).
    pub fn radius_map(&self, angle: T, radii: &[T]) -> Vec<T> {
        let built = self.layers_at(angle);
        let (f0, _) = Stack::x_from_z(&built, T::zero());
        radii
            .iter()
            .map(|&r| Stack::x_from_z(&built, r).0 - f0)
            .collect()
    }

    /// The stack's constrained parameters for direction `angle`, one vector per layer.
    pub fn layer_params(&self, angle: T) -> Vec<Vec<f64>> {
        self.layers_at(angle)
            .iter()
            .map(|l| l.constrained())
            .collect()
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
        self.run_blocks(z, x, log_det, None, Self::x_from_z_block);
    }

    fn z_from_x(&self, x: &[T], z: &mut [T], log_det: &mut [T]) {
        self.run_blocks(x, z, log_det, None, Self::z_from_x_block);
    }

    fn z_from_x_grad(
        &self,
        x: &[T],
        adjoint: &Adjoint<T>,
        z: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    ) {
        self.run_blocks(x, z, log_det, Some((adjoint, grad)), Self::z_from_x_block);
    }

    fn x_from_z_grad(
        &self,
        z: &[T],
        adjoint: &Adjoint<T>,
        x: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    ) {
        self.run_blocks(z, x, log_det, Some((adjoint, grad)), Self::x_from_z_block);
    }
}
