//! The element-wise flow: one scalar stack applied to every coordinate with the
//! same parameters. In 1D it is simply the stack (bijx's 1D demo).

use super::{Adjoint, Flow, FlowError};
use crate::bijection::{Scalar, Stack};
use crate::real::Real;
use crate::rng::Rng;

#[derive(Clone, Debug)]
pub struct ElementwiseFlow<T> {
    pub dim: usize,
    pub stack: Stack,
    params: Vec<T>,
}

impl<T: Real> ElementwiseFlow<T> {
    pub fn init(dim: usize, stack: Stack, rng: &mut Rng) -> Result<Self, FlowError> {
        let raw = stack.default_raw(&mut || rng.normal());
        Self::from_params(dim, stack, raw.into_iter().map(T::c).collect())
    }

    pub fn from_params(dim: usize, stack: Stack, params: Vec<T>) -> Result<Self, FlowError> {
        let flow = "element-wise";
        if !(1..=super::limits::MAX_DIM).contains(&dim) {
            return Err(FlowError::Dimension { flow, min: 1 });
        }
        if stack.is_empty() {
            return Err(FlowError::EmptyStack { flow });
        }
        if params.len() != stack.n_raw() {
            return Err(FlowError::ParamCount {
                flow,
                expected: stack.n_raw(),
                got: params.len(),
            });
        }
        Ok(Self { dim, stack, params })
    }

    fn built(&self) -> Vec<Scalar<T>> {
        let mut built = Vec::new();
        self.stack.build(&self.params, &mut built);
        built
    }

    fn run(
        &self,
        sampling: bool,
        input: &[T],
        output: &mut [T],
        log_det: &mut [T],
        mut backward: Option<(&Adjoint<T>, &mut [T])>,
    ) {
        let built = self.built();
        let d = self.dim;
        let k = self.stack.len();
        let mut traces = vec![T::zero(); d * k];
        let mut bar = vec![T::zero(); d];
        for (i, ld) in log_det.iter_mut().enumerate() {
            *ld = T::zero();
            for j in 0..d {
                let v = input[i * d + j];
                let trace = &mut traces[j * k..(j + 1) * k];
                let (out, logd) = if sampling {
                    Stack::x_from_z_trace(&built, v, trace)
                } else {
                    Stack::z_from_x_trace(&built, v, trace)
                };
                output[i * d + j] = out;
                *ld += if sampling { logd } else { -logd };
            }
            if let Some((adjoint, grad)) = backward.as_mut() {
                bar.iter_mut().for_each(|v| *v = T::zero());
                let ld_bar = adjoint(i, &output[i * d..(i + 1) * d], *ld, &mut bar);
                for j in 0..d {
                    let trace = &traces[j * k..(j + 1) * k];
                    if sampling {
                        let x = output[i * d + j];
                        self.stack
                            .x_from_z_backward(&built, trace, x, bar[j], ld_bar, grad);
                    } else {
                        let x = input[i * d + j];
                        self.stack
                            .z_from_x_backward(&built, trace, x, bar[j], ld_bar, grad);
                    }
                }
            }
        }
    }
}

impl<T: Real> Flow<T> for ElementwiseFlow<T> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn params(&self) -> &[T] {
        &self.params
    }

    fn params_mut(&mut self) -> &mut [T] {
        &mut self.params
    }

    fn x_from_z(&self, z: &[T], x: &mut [T], log_det: &mut [T]) {
        self.run(true, z, x, log_det, None);
    }

    fn z_from_x(&self, x: &[T], z: &mut [T], log_det: &mut [T]) {
        self.run(false, x, z, log_det, None);
    }

    fn z_from_x_grad(
        &self,
        x: &[T],
        adjoint: &Adjoint<T>,
        z: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    ) {
        self.run(false, x, z, log_det, Some((adjoint, grad)));
    }

    fn x_from_z_grad(
        &self,
        z: &[T],
        adjoint: &Adjoint<T>,
        x: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    ) {
        self.run(true, z, x, log_det, Some((adjoint, grad)));
    }
}
