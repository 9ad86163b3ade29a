//! The driver every coupling-style flow shares (coordinate coupling flows and
//! lattice coupling flows): the layers run in order in the sampling direction
//! and inverted in reverse order in the density direction, with their reverse
//! mode, and one [`super::Flow`] implementation for any of them
//! ([`flow_through_layers`]).

use super::Adjoint;
use crate::real::Real;

/// The direction a layer runs in.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Direction {
    XFromZ,
    ZFromX,
}

/// A flow of coupling layers: the sampling direction applies layers 0, 1, ...,
/// the density direction their inverses in reverse order.
pub(super) trait CouplingLayers<T: Real> {
    /// What one layer's forward pass keeps for its backward pass.
    type Cache;

    fn dim(&self) -> usize;
    fn params(&self) -> &[T];
    fn params_mut(&mut self) -> &mut [T];

    fn n_layers(&self) -> usize;

    /// Runs layer `l` in `dir` on `cur` (n x d) in place, adding log-dets.
    fn layer_forward(
        &self,
        l: usize,
        dir: Direction,
        cur: &mut [T],
        log_det: &mut [T],
    ) -> Self::Cache;

    /// Backward through layer `l`: `bar` holds the output adjoints (n x d) and
    /// is turned into the input adjoints; parameter adjoints go into `grad`.
    fn layer_backward(
        &self,
        l: usize,
        dir: Direction,
        cache: &Self::Cache,
        bar: &mut [T],
        ld_bar: &[T],
        grad: &mut [T],
    );
}

/// Runs every layer of `flow` in `dir` from `input` into `output` and, given
/// an adjoint, back through them, adding parameter adjoints into its `grad`.
pub(super) fn run_layers<T: Real, F: CouplingLayers<T>>(
    flow: &F,
    dir: Direction,
    input: &[T],
    output: &mut [T],
    log_det: &mut [T],
    backward: Option<(&Adjoint<T>, &mut [T])>,
) {
    output.copy_from_slice(input);
    log_det.iter_mut().for_each(|v| *v = T::zero());
    let order: Vec<usize> = match dir {
        Direction::XFromZ => (0..flow.n_layers()).collect(),
        Direction::ZFromX => (0..flow.n_layers()).rev().collect(),
    };
    let mut caches = Vec::with_capacity(order.len());
    for &l in &order {
        caches.push(flow.layer_forward(l, dir, output, log_det));
    }
    let Some((adjoint, grad)) = backward else {
        return;
    };
    let d = output.len() / log_det.len().max(1);
    let mut bar = vec![T::zero(); output.len()];
    let ld_bar: Vec<T> = (0..log_det.len())
        .map(|i| {
            adjoint(
                i,
                &output[i * d..(i + 1) * d],
                log_det[i],
                &mut bar[i * d..(i + 1) * d],
            )
        })
        .collect();
    for (&l, cache) in order.iter().zip(&caches).rev() {
        flow.layer_backward(l, dir, cache, &mut bar, &ld_bar, grad);
    }
}

/// Makes a coupling-style flow a [`Flow`] through its [`CouplingLayers`]:
/// one definition for every such flow. (A blanket implementation over the
/// trait would overlap the other flows' in the compiler's eyes.)
macro_rules! flow_through_layers {
    ($flow:ident) => {
        impl<T: $crate::real::Real> $crate::flow::Flow<T> for $flow<T> {
            fn dim(&self) -> usize {
                $crate::flow::layers::CouplingLayers::dim(self)
            }

            fn params(&self) -> &[T] {
                $crate::flow::layers::CouplingLayers::params(self)
            }

            fn params_mut(&mut self) -> &mut [T] {
                $crate::flow::layers::CouplingLayers::params_mut(self)
            }

            fn x_from_z(&self, z: &[T], x: &mut [T], log_det: &mut [T]) {
                let dir = $crate::flow::layers::Direction::XFromZ;
                $crate::flow::layers::run_layers(self, dir, z, x, log_det, None);
            }

            fn z_from_x(&self, x: &[T], z: &mut [T], log_det: &mut [T]) {
                let dir = $crate::flow::layers::Direction::ZFromX;
                $crate::flow::layers::run_layers(self, dir, x, z, log_det, None);
            }

            fn z_from_x_grad(
                &self,
                x: &[T],
                adjoint: &$crate::flow::Adjoint<T>,
                z: &mut [T],
                log_det: &mut [T],
                grad: &mut [T],
            ) {
                let dir = $crate::flow::layers::Direction::ZFromX;
                let backward = Some((adjoint, grad));
                $crate::flow::layers::run_layers(self, dir, x, z, log_det, backward);
            }

            fn x_from_z_grad(
                &self,
                z: &[T],
                adjoint: &$crate::flow::Adjoint<T>,
                x: &mut [T],
                log_det: &mut [T],
                grad: &mut [T],
            ) {
                let dir = $crate::flow::layers::Direction::XFromZ;
                let backward = Some((adjoint, grad));
                $crate::flow::layers::run_layers(self, dir, z, x, log_det, backward);
            }
        }
    };
}

pub(super) use flow_through_layers;
