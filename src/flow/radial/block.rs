//! A radial flow on a block of up to [`LANES`] samples at once: their ray
//! geometry, and their scalar chains run in lockstep (independent chains
//! overlap in the CPU), in both directions with their reverse mode.

use super::{EPS, RadialConditioner, RadialFlow, needs_differences};
use crate::bijection::lanes::PackedStack;
use crate::bijection::{Scalar, Stack};
use crate::flow::Adjoint;
use crate::real::Real;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

/// A block's adjoint callback (lane, point, log-det, adjoint out) and the gradient to add into.
type Backward<'a, T> = (
    &'a mut dyn FnMut(usize, &[T], T, &mut [T]) -> T,
    &'a mut [T],
);

/// One direction on one block: (flow, input, output, log-det, scratch, backward).
type BlockFn<T> =
    fn(&RadialFlow<T>, &[T], &mut [T], &mut [T], &mut Work<T>, Option<Backward<'_, T>>);

/// Samples processed together: their scalar chains run in lockstep.
pub(super) const LANES: usize = crate::bijection::lanes::LANES;

/// Scratch space for a block of up to [`LANES`] samples.
pub(super) struct Work<T> {
    lanes: usize,
    /// per lane: `S (p - c)` (d values), its norm, its direction (2D)
    w: Vec<T>,
    r_in: [T; LANES],
    u: [[T; 2]; LANES],
    /// per lane: the stack's layers for that lane's direction
    pub(super) built: Vec<Vec<Scalar<T>>>,
    /// the same packed lane by lane, when every layer is of a packed family
    /// (the chains then run as vector instructions)
    packed: PackedStack<T>,
    packed_ok: bool,
    /// whether `built[lane]` holds this block's layers (a packed Fourier block
    /// builds a lane's only when a scalar pass needs it)
    built_ok: [bool; LANES],
    /// the Fourier conditioner's raw stack parameters, lane-inner (`P x
    /// LANES`, as the packed stack takes them)
    raws: Vec<T>,
    /// the raw adjoints of the scalar passes, lane-major (`lanes x P`)
    raw_bar: Vec<T>,
    /// the raw adjoints of the packed passes, lane-inner (`P x LANES`); a
    /// direct flow's are summed over a run's blocks and taken at its end
    raw_bar_inner: Vec<T>,
    features: Vec<T>,
    /// the same feature by feature, lane-inner (`F` rows of [`LANES`])
    phi: Vec<[T; LANES]>,
    /// the Fourier weights times the raw adjoints (2 order x lanes)
    w_r: Vec<T>,
    /// traces of the f(0) chains and of the main chains (`K x LANES`):
    /// lane-inner where the block is packed, else lane-major. A direct
    /// flow's f(0) chain is `shared_trace0`, never copied here.
    trace0: Vec<T>,
    trace: Vec<T>,
    /// one lane's raw values, f(0) trace and main trace, lane-major, for the
    /// scalar rules that take them (the rare lanes near the centre)
    lane_raw: Vec<T>,
    lane_trace0: Vec<T>,
    lane_trace: Vec<T>,
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
    /// the adjoint of the shared f(0), summed over every block of a run: one
    /// reverse pass through its chain at the end serves them all
    shared_f0_bar: T,
    /// the body the shared layers above were built from (a direct flow)
    body_seen: Vec<T>,
}

/// Scratch spaces kept between runs (a run: one part of a batch, or one call
/// of a density grid), so that a run neither allocates nor, for a direct
/// flow whose parameters have not changed since, builds its shared layers,
/// their chain at 0 and their packed form again: with parts of 64 samples,
/// that setup cost a direct flow an eighth of a training step.
#[derive(Default)]
pub(super) struct WorkPool<T>(std::sync::Mutex<Vec<Work<T>>>);

impl<T> WorkPool<T> {
    fn take(&self) -> Option<Work<T>> {
        self.0.lock().ok()?.pop()
    }

    fn give(&self, work: Work<T>) {
        if let Ok(mut pool) = self.0.lock() {
            pool.push(work);
        }
    }
}

/// A copy of a flow starts with no scratch of its own.
impl<T> Clone for WorkPool<T> {
    fn clone(&self) -> Self {
        Self(std::sync::Mutex::new(Vec::new()))
    }
}

impl<T> std::fmt::Debug for WorkPool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkPool")
    }
}

impl<T: Real> RadialFlow<T> {
    pub(super) fn body(&self) -> &[T] {
        &self.params[2 * self.spec.dim..]
    }

    pub(super) fn work(&self) -> Work<T> {
        let p = self.spec.stack.n_raw();
        let k = self.spec.stack.len();
        let d = self.spec.dim;
        let z = T::zero();
        let mut work = Work {
            lanes: 0,
            w: vec![z; LANES * d],
            r_in: [z; LANES],
            u: [[z; 2]; LANES],
            built: (0..LANES).map(|_| Vec::with_capacity(k)).collect(),
            packed: PackedStack::new(),
            packed_ok: false,
            built_ok: [true; LANES],
            raws: vec![z; LANES * p],
            raw_bar: vec![z; LANES * p],
            raw_bar_inner: vec![z; LANES * p],
            features: vec![z; LANES * self.spec.n_features()],
            phi: vec![[z; LANES]; self.spec.n_features()],
            w_r: vec![z; LANES * self.spec.n_features()],
            trace0: vec![z; LANES * k],
            trace: vec![z; LANES * k],
            lane_raw: vec![z; p],
            lane_trace0: vec![z; k],
            lane_trace: vec![z; k],
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
            shared_f0: z,
            shared_trace0: vec![z; k],
            shared_f0_bar: z,
            body_seen: Vec::new(),
        };
        self.refresh_shared(&mut work);
        work
    }

    /// A scratch space for one run: one kept from an earlier run, or a new one.
    fn take_work(&self) -> Work<T> {
        match self.works.take() {
            Some(mut work) => {
                self.refresh_shared(&mut work);
                work
            }
            None => self.work(),
        }
    }

    /// A direct flow's shared layers and their chain at 0, built again where
    /// the body changed since `work` last saw it (a training step).
    fn refresh_shared(&self, work: &mut Work<T>) {
        if self.spec.conditioner != RadialConditioner::Direct || work.body_seen == self.body() {
            return;
        }
        let (first, rest) = work.built.split_at_mut(1);
        self.spec.stack.build(self.body(), &mut first[0]);
        for layers in rest {
            layers.clone_from(&first[0]);
        }
        work.shared_f0 = Stack::x_from_z_value_trace(&first[0], T::zero(), &mut work.shared_trace0);
        work.packed_ok = false;
        work.body_seen.clear();
        work.body_seen.extend_from_slice(self.body());
    }

    /// Fourier features of direction `u` (2D) into `out`: `sin(k t) / k` and
    /// `cos(k t) / k` for `t = atan2(u1, u0) + pi`, then 1. From `cos t` and
    /// `sin t` (`-u / |u|`) by the angle-addition recurrence, without
    /// trigonometric calls (they were a twentieth of a training step); the
    /// rounding grows by about an ulp per order.
    fn fourier(order: usize, u: &[T], out: &mut [T]) {
        // scaled first, so that a tiny u's square does not underflow
        let largest = u[0].abs().max(u[1].abs());
        let (c1, s1) = if u[0].is_nan() || u[1].is_nan() {
            (T::c(f64::NAN), T::c(f64::NAN))
        } else if largest > T::zero() {
            let (a, b) = (u[0] / largest, u[1] / largest);
            let norm = (a * a + b * b).sqrt();
            (-a / norm, -b / norm)
        } else {
            // u = 0 (a point at the centre): t = pi, as atan2(+0, +0) = 0
            // gives and as the GPU's shader takes it
            (-T::one(), T::zero())
        };
        let (mut c, mut s) = (c1, s1);
        for k in 1..=order {
            let inv_k = T::c(1.0 / k as f64);
            out[k - 1] = s * inv_k;
            out[order + k - 1] = c * inv_k;
            (c, s) = (c * c1 - s * s1, s * c1 + c * s1);
        }
        out[2 * order] = T::one();
    }

    /// Phase 1 of both directions: for each lane's point `p`, `w = S (p - c)`,
    /// its norm and direction, and (Fourier) that direction's stack layers.
    pub(super) fn geometry(&self, points: &[T], work: &mut Work<T>) {
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
                work.built_ok[lane] = false;
            }
            work.f0[lane] = T::zero();
        }
        let n = work.lanes;
        if let RadialConditioner::Fourier { order } = self.spec.conditioner {
            // raw = W features for every lane at once (lane-inner), W stored
            // feature-major (one row of P per feature); the padding lanes
            // repeat the last
            let nf = 2 * order + 1;
            let n_raw = self.spec.stack.n_raw();
            for (f, phi) in work.phi.iter_mut().enumerate() {
                *phi = std::array::from_fn(|lane| work.features[lane.min(n - 1) * nf + f]);
            }
            let (body, phis) = (self.body(), &work.phi);
            // one row at a time, its sum over the features held in registers
            // (the same additions in the same order as feature by feature)
            crate::real::on_avx2(
                #[inline(always)]
                || {
                    for (j, row) in work.raws.chunks_exact_mut(LANES).enumerate() {
                        let mut sum = [T::zero(); LANES];
                        for (f, phi) in phis.iter().enumerate() {
                            let w = body[f * n_raw + j];
                            for (s, &phi) in sum.iter_mut().zip(phi) {
                                *s += w * phi;
                            }
                        }
                        row.copy_from_slice(&sum);
                    }
                },
            );
        }
        match self.spec.conditioner {
            RadialConditioner::Fourier { .. } => {
                // straight into packed form where the family allows it
                work.packed_ok = work.packed.build(&self.spec.stack, &work.raws, n);
                if !work.packed_ok {
                    for lane in 0..n {
                        self.ensure_built(work, lane);
                    }
                    work.packed_ok = work.packed.pack(&work.built[..n]);
                }
            }
            RadialConditioner::Direct => {
                // one stack for every direction: packed again only for a new lane count
                if !(work.packed_ok && work.packed.lanes() == n) {
                    work.packed_ok = work.packed.pack(&work.built[..n]);
                }
            }
        }
    }

    /// Builds lane `lane`'s layers into `built` if this block has not yet.
    pub(super) fn ensure_built(&self, work: &mut Work<T>, lane: usize) {
        if !work.built_ok[lane] {
            for (j, r) in work.lane_raw.iter_mut().enumerate() {
                *r = work.raws[j * LANES + lane];
            }
            self.spec.stack.build(&work.lane_raw, &mut work.built[lane]);
            work.built_ok[lane] = true;
        }
    }

    /// Gathers lane `lane`'s f(0) trace into `lane_trace0` where a packed
    /// block's traces are lane-inner (see [`Self::lane_trace0`]).
    fn gather_lane_trace0(&self, work: &mut Work<T>, lane: usize) {
        if self.spec.conditioner != RadialConditioner::Direct && work.packed_ok {
            for (j, t) in work.lane_trace0.iter_mut().enumerate() {
                *t = work.trace0[j * LANES + lane];
            }
        }
    }

    /// Lane `lane`'s f(0) trace, lane-major, as a scalar rule takes it: a
    /// direct flow's shared one, or the lane's own (gathered first by
    /// [`Self::gather_lane_trace0`]).
    fn lane_trace0<'a>(&self, work: &'a Work<T>, lane: usize) -> &'a [T] {
        let k = self.spec.stack.len();
        if self.spec.conditioner == RadialConditioner::Direct {
            &work.shared_trace0
        } else if work.packed_ok {
            &work.lane_trace0
        } else {
            &work.trace0[lane * k..(lane + 1) * k]
        }
    }

    /// The f(0) chains of every lane (f~(r) = f(r) - f(0)).
    fn offsets(&self, work: &mut Work<T>) {
        let n = work.lanes;
        let k = self.spec.stack.len();
        if self.spec.conditioner == RadialConditioner::Direct {
            // one stack for every direction: the chain at 0 is the same for all
            work.f0[..n].fill(work.shared_f0);
            return;
        }
        if work.packed_ok {
            work.packed
                .x_from_z_value(&mut work.f0[..n], &mut work.trace0);
        } else {
            Stack::x_from_z_value_lanes(
                &work.built[..n],
                &mut work.f0[..n],
                &mut work.trace0[..n * k],
            );
        }
    }

    /// Backward through the f(0) chains, given each lane's adjoint of f(0). With
    /// one stack for every direction the adjoints add up, and one pass at the
    /// end of the run serves every block ([`Self::shared_offset_backward`]).
    fn offsets_backward(&self, work: &mut Work<T>, mut f0_bar: [T; LANES]) {
        let n = work.lanes;
        let k = self.spec.stack.len();
        if self.spec.conditioner == RadialConditioner::Direct {
            work.shared_f0_bar += f0_bar[..n].iter().copied().sum::<T>();
            return;
        }
        if work.packed_ok {
            work.packed.x_from_z_backward(
                &work.trace0,
                &work.f0[..n],
                &mut f0_bar[..n],
                &work.zeros[..n],
                &mut work.raw_bar_inner,
            );
            return;
        }
        self.spec.stack.x_from_z_backward_lanes(
            &work.built[..n],
            &work.trace0[..n * k],
            &work.f0[..n],
            &mut f0_bar[..n],
            &work.zeros[..n],
            &mut work.raw_bar,
        );
    }

    /// The shared f(0)'s summed adjoint (a direct flow) back through its chain
    /// into the body's gradient, once for the whole run.
    fn shared_offset_backward(&self, work: &mut Work<T>, grad: &mut [T]) {
        if self.spec.conditioner != RadialConditioner::Direct {
            return;
        }
        let p = self.spec.stack.n_raw();
        // the packed blocks' raw adjoints, summed lane by lane over the run
        // (the padding lanes' are zeros)
        let g_body = &mut grad[2 * self.spec.dim..];
        for (g, row) in g_body
            .iter_mut()
            .zip(work.raw_bar_inner.chunks_exact_mut(LANES))
        {
            *g += row.iter().fold(T::zero(), |sum, &v| sum + v);
            row.fill(T::zero());
        }
        let mut bar = [std::mem::replace(&mut work.shared_f0_bar, T::zero())];
        let raw_bar = &mut work.raw_bar[..p];
        self.spec.stack.x_from_z_backward_lanes(
            &work.built[..1],
            &work.shared_trace0,
            &[work.shared_f0],
            &mut bar,
            &work.zeros[..1],
            raw_bar,
        );
        let g_body = &mut grad[2 * self.spec.dim..];
        for (g, r) in g_body.iter_mut().zip(raw_bar.iter_mut()) {
            *g += *r;
            *r = T::zero();
        }
    }

    /// Last phase of both directions' backward passes: the stack's raw adjoints
    /// into the body's gradient, the direction's adjoint into `w_bar`, then
    /// `w = S (p - c)` into the centre and log-scale gradients.
    fn geometry_backward(&self, work: &mut Work<T>, grad: &mut [T]) {
        let d = self.spec.dim;
        let p = self.spec.stack.n_raw();
        let n = work.lanes;
        let (c_len, sigma) = (d, self.log_scale());
        let (g_c, rest) = grad.split_at_mut(c_len);
        let (g_sigma, g_body) = rest.split_at_mut(d);
        match self.spec.conditioner {
            RadialConditioner::Direct => {
                // the scalar passes' (a direct flow's packed adjoints wait for
                // the end of the run)
                for raw_bar in work.raw_bar.chunks_exact(p).take(n) {
                    for (g, &b) in g_body.iter_mut().zip(raw_bar) {
                        *g += b;
                    }
                }
            }
            RadialConditioner::Fourier { order } => {
                self.fourier_backward(order, work, g_body);
            }
        }
        for lane in 0..n {
            let w = &work.w[lane * d..(lane + 1) * d];
            let w_bar = &work.w_bar[lane * d..(lane + 1) * d];
            for j in 0..d {
                g_c[j] -= sigma[j].exp() * w_bar[j];
                g_sigma[j] += w_bar[j] * w[j];
            }
        }
        work.raw_bar[..n * p].fill(T::zero());
        if self.spec.conditioner != RadialConditioner::Direct {
            work.raw_bar_inner.fill(T::zero());
        }
    }

    /// The Fourier conditioner's part of [`Self::geometry_backward`]: with `R`
    /// the block's raw adjoints (P x lanes) and `Phi` its features (lanes x
    /// F), `grad(W) += R Phi` and, through each direction's angle,
    /// `t_bar = dPhi/dt . (W R)`, both as matrix products.
    fn fourier_backward(&self, order: usize, work: &mut Work<T>, g_body: &mut [T]) {
        let (p, n, nf) = (self.spec.stack.n_raw(), work.lanes, 2 * order + 1);
        fn shaped<V>(_: ndarray::ShapeError) -> V {
            unreachable!("sized by the spec")
        }
        // the packed passes left them lane-inner, the scalar ones lane-major
        let raw_bar = if work.packed_ok {
            ArrayView2::from_shape((p, n).strides((LANES, 1)), &work.raw_bar_inner[..])
        } else {
            ArrayView2::from_shape((p, n).strides((1, p)), &work.raw_bar[..])
        }
        .unwrap_or_else(shaped);
        let features =
            ArrayView2::from_shape((n, nf), &work.features[..n * nf]).unwrap_or_else(shaped);
        // W is stored feature-major (F x P): its gradient's transpose is P x F
        let mut g_w = ArrayViewMut2::from_shape((p, nf).strides((1, p)), &mut g_body[..nf * p])
            .unwrap_or_else(shaped);
        general_mat_mul(T::one(), &raw_bar, &features, T::one(), &mut g_w);
        // (W R)'s rows for the sine and cosine features (the constant has no angle)
        let w = ArrayView2::from_shape((2 * order, p), &self.body()[..2 * order * p])
            .unwrap_or_else(shaped);
        let mut w_r = ArrayViewMut2::from_shape((2 * order, n), &mut work.w_r[..2 * order * n])
            .unwrap_or_else(shaped);
        general_mat_mul(T::one(), &w, &raw_bar, T::zero(), &mut w_r);
        for lane in 0..n {
            // d features / dt from the features: cos(kt) = k (cos(kt) / k) for
            // the sines, -sin(kt) = -k (sin(kt) / k) for the cosines
            let phi = &work.features[lane * nf..(lane + 1) * nf];
            let mut t_bar = T::zero();
            for k in 1..=order {
                let kk = T::c(k as f64);
                t_bar += w_r[[k - 1, lane]] * (kk * phi[order + k - 1]);
                t_bar += w_r[[order + k - 1, lane]] * -(kk * phi[k - 1]);
            }
            // t = atan2(u1, u0): dt/du = (-u1, u0); u = w / r.
            let (u, r) = (work.u[lane], work.r_in[lane]);
            let u_bar = [-u[1] * t_bar, u[0] * t_bar];
            let dot = u_bar[0] * u[0] + u_bar[1] * u[1];
            for j in 0..2 {
                // (Fourier flows are 2D)
                work.w_bar[lane * 2 + j] += (u_bar[j] - dot * u[j]) / r;
            }
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
    pub(super) fn z_from_x_block(
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
        if work.packed_ok {
            work.packed.z_from_x(
                &mut work.chain_out[..n],
                &mut work.logd[..n],
                &mut work.trace,
            );
        } else {
            Stack::z_from_x_lanes(
                &work.built[..n],
                &mut work.chain_out[..n],
                &mut work.logd[..n],
                &mut work.trace[..n * k],
            );
        }
        for lane in 0..n {
            // Near the centre r_in + f(0) drops r_in's low bits: redo the chain as
            // differences from the chain at 0.
            if needs_differences(work.f0[lane], work.r_in[lane]) {
                self.ensure_built(work, lane);
                let mut lane_trace = std::mem::take(&mut work.lane_trace);
                let (f0, r_in) = (work.f0[lane], work.r_in[lane]);
                self.gather_lane_trace0(work, lane);
                let out = Stack::z_from_x_diff(
                    &work.built[lane],
                    self.lane_trace0(work, lane),
                    f0,
                    r_in,
                    &mut lane_trace,
                );
                work.chain_out[lane] = out;
                // the new trace where the backward pass reads it
                if work.packed_ok {
                    for (j, &t) in lane_trace.iter().enumerate() {
                        work.trace[j * LANES + lane] = t;
                    }
                } else {
                    work.trace[lane * k..(lane + 1) * k].copy_from_slice(&lane_trace);
                }
                work.lane_trace = lane_trace;
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
        if work.packed_ok {
            work.packed.z_from_x_backward(
                &work.trace,
                &work.chain_in[..n],
                &mut work.bar[..n],
                &work.ld_bar[..n],
                &mut work.raw_bar_inner,
            );
        } else {
            self.spec.stack.z_from_x_backward_lanes(
                &work.built[..n],
                &work.trace[..n * k],
                &work.chain_in[..n],
                &mut work.bar[..n],
                &work.ld_bar[..n],
                &mut work.raw_bar,
            );
        }
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
    pub(super) fn x_from_z_block(
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
        if work.packed_ok {
            work.packed.x_from_z(
                &mut work.chain_out[..n],
                &mut work.logd[..n],
                &mut work.trace,
            );
        } else {
            Stack::x_from_z_lanes(
                &work.built[..n],
                &mut work.chain_out[..n],
                &mut work.logd[..n],
                &mut work.trace[..n * k],
            );
        }
        for lane in 0..n {
            let f0 = work.f0[lane];
            let mut r_out = work.chain_out[lane] - f0;
            // f(r) - f(0) cancels when r is small against f(0): take the
            // difference layer by layer instead.
            if needs_differences(f0, r_out) {
                self.ensure_built(work, lane);
                let r_in = work.r_in[lane];
                self.gather_lane_trace0(work, lane);
                let trace0 = self.lane_trace0(work, lane);
                r_out = Stack::x_from_z_diff(&work.built[lane], trace0, f0, r_in);
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
        if work.packed_ok {
            work.packed.x_from_z_backward(
                &work.trace,
                &work.chain_out[..n],
                &mut work.bar[..n],
                &work.ld_bar[..n],
                &mut work.raw_bar_inner,
            );
        } else {
            self.spec.stack.x_from_z_backward_lanes(
                &work.built[..n],
                &work.trace[..n * k],
                &work.chain_out[..n],
                &mut work.bar[..n],
                &work.ld_bar[..n],
                &mut work.raw_bar,
            );
        }
        self.offsets_backward(work, work.f0_bar);
        for lane in 0..n {
            let r_bar = work.chain_in[lane] + work.bar[lane];
            for j in 0..d {
                work.w_bar[lane * d + j] += r_bar * work.w[lane * d + j] / work.r_in[lane];
            }
        }
        self.geometry_backward(work, grad);
    }

    /// Runs `block` over the batch in blocks of [`LANES`] points.
    pub(super) fn run_blocks(
        &self,
        input: &[T],
        output: &mut [T],
        log_det: &mut [T],
        mut grad: Option<(&Adjoint<T>, &mut [T])>,
        block: BlockFn<T>,
    ) {
        let d = self.spec.dim;
        let mut work = self.take_work();
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
        if let Some((_, g)) = grad {
            self.shared_offset_backward(&mut work, g);
        }
        self.works.give(work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recurrence's features are the trigonometric ones of the angle
    /// (float64 to 1e-14, float32 to a few ulp), at the centre too.
    #[test]
    fn fourier_features_by_recurrence_are_those_of_the_angle() {
        fn by_angle(order: usize, u: [f64; 2]) -> Vec<f64> {
            let t = u[1].atan2(u[0]) + std::f64::consts::PI;
            let mut out = vec![1.0; 2 * order + 1];
            for k in 1..=order {
                out[k - 1] = (k as f64 * t).sin() / k as f64;
                out[order + k - 1] = (k as f64 * t).cos() / k as f64;
            }
            out
        }
        let order = 6;
        let mut directions: Vec<[f64; 2]> = (0..97)
            .map(|i| {
                let a = 0.37 + i as f64 * std::f64::consts::TAU / 97.0;
                // not quite unit length, as u = w / sqrt(|w|^2 + eps^2) is
                [0.9 * a.cos(), 0.9 * a.sin()]
            })
            .collect();
        directions.extend([[0.0, 0.0], [1.0, 0.0], [-1.0, -0.0], [0.0, -1e-30]]);
        // a NaN direction gives NaN features, as atan2 did (the constant stays 1)
        let mut nan = vec![0.0; 2 * order + 1];
        RadialFlow::<f64>::fourier(order, &[f64::NAN, 0.5], &mut nan);
        assert!(nan[..2 * order].iter().all(|v| v.is_nan()) && nan[2 * order] == 1.0);
        for u in directions {
            let expected = by_angle(order, u);
            let mut f64s = vec![0.0; 2 * order + 1];
            RadialFlow::<f64>::fourier(order, &u, &mut f64s);
            let mut f32s = vec![0.0f32; 2 * order + 1];
            RadialFlow::<f32>::fourier(order, &[u[0] as f32, u[1] as f32], &mut f32s);
            for (i, &e) in expected.iter().enumerate() {
                assert!(
                    (f64s[i] - e).abs() < 1e-14,
                    "{u:?} feature {i}: {} vs {e}",
                    f64s[i]
                );
                assert!(
                    (f32s[i] as f64 - e).abs() < 3e-6,
                    "{u:?} feature {i}: {} vs {e}",
                    f32s[i]
                );
            }
        }
    }
}
