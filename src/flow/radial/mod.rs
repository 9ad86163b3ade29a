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

mod block;

use super::{Adjoint, Flow, FlowError};
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
    pub fn validate(&self) -> Result<(), FlowError> {
        let flow = "radial";
        if !(1..=super::limits::MAX_DIM).contains(&self.dim) {
            return Err(FlowError::Dimension { flow, min: 1 });
        }
        if self.stack.is_empty() {
            return Err(FlowError::EmptyStack { flow });
        }
        if let RadialConditioner::Fourier { order } = self.conditioner {
            if self.dim != 2 {
                return Err(FlowError::FourierNot2d);
            }
            if order == 0 || order > MAX_ORDER {
                return Err(FlowError::FourierOrder { max: MAX_ORDER });
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
    /// scratch spaces kept between runs
    works: block::WorkPool<T>,
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
    ) -> Result<Self, FlowError> {
        spec.validate()?;
        let d = spec.dim;
        let mut p: Vec<f64> = Vec::with_capacity(spec.n_params());
        for (given, what, spread) in [(center, "centre", 1.0), (log_scale, "log-scale", 0.1)] {
            match given {
                Some(v) if v.len() == d => p.extend_from_slice(v),
                Some(v) => {
                    return Err(FlowError::Coordinates {
                        what,
                        got: v.len(),
                        dim: d,
                    });
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
            works: block::WorkPool::default(),
        })
    }

    /// A flow with the given parameter values (checked for length).
    pub fn from_params(spec: RadialSpec, params: Vec<T>) -> Result<Self, FlowError> {
        spec.validate()?;
        if params.len() != spec.n_params() {
            return Err(FlowError::ParamCount {
                flow: "radial",
                expected: spec.n_params(),
                got: params.len(),
            });
        }
        Ok(Self {
            spec,
            params,
            works: block::WorkPool::default(),
        })
    }

    pub fn center(&self) -> &[T] {
        &self.params[..self.spec.dim]
    }

    pub fn log_scale(&self) -> &[T] {
        &self.params[self.spec.dim..2 * self.spec.dim]
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
        self.ensure_built(&mut work, 0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bijection::Family;

    /// A flow's scratch spaces outlive its runs: after its parameters change,
    /// a run that reuses one gives what a fresh copy of the flow gives.
    #[test]
    fn kept_scratch_follows_new_parameters() {
        let mut rng = Rng::seeded(7);
        let spec = RadialSpec {
            dim: 2,
            stack: Stack::uniform(Family::Cubic, 6),
            conditioner: RadialConditioner::Direct,
        };
        let mut flow = RadialFlow::<f64>::init(spec, None, None, &mut rng).expect("valid");
        let x: Vec<f64> = (0..2 * 40).map(|i| (i as f64 * 0.37).sin() * 2.0).collect();
        let run = |flow: &RadialFlow<f64>| {
            let (mut z, mut ld) = (vec![0.0; x.len()], vec![0.0; x.len() / 2]);
            flow.z_from_x(&x, &mut z, &mut ld);
            (z, ld)
        };
        let before = run(&flow);
        for p in &mut flow.params_mut()[4..] {
            *p += 0.05 * rng.normal();
        }
        let fresh =
            RadialFlow::from_params(flow.spec.clone(), flow.params().to_vec()).expect("same spec");
        let after = run(&flow);
        assert_eq!(after, run(&fresh));
        assert_ne!(after, before);
    }
}
