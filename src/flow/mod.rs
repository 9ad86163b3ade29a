//! Flows on R^d built from scalar bijections: radial flows (direct and
//! angle-dependent), coupling flows (on coordinates, or on a lattice field with
//! checkerboard masks and convolutions), and an element-wise scalar flow.
//!
//! All batch arrays are row-major, `n x dim`. Directions are named by their
//! spaces: `x_from_z` samples, `z_from_x` evaluates densities. `log_det` is
//! `log |det d(output)/d(input)|` of the direction computed.

pub mod coupling;
pub mod elementwise;
pub mod error;
pub mod grid;
pub mod lattice;
mod layers;
pub mod model;
pub mod nn;
pub mod radial;

use crate::real::Real;
pub use coupling::{CouplingFlow, CouplingSpec};
pub use elementwise::ElementwiseFlow;
pub use error::FlowError;
pub use lattice::{ConvDesign, LatticeFlow, LatticeSpec};
pub use model::{FlowConfig, FlowKind, FlowModel};
pub use nn::Activation;
pub use radial::{RadialConditioner, RadialFlow, RadialSpec};

/// Largest sizes a flow may have: model files and flags are checked against these
/// before anything is allocated.
pub mod limits {
    /// Data dimension.
    pub const MAX_DIM: usize = 4096;
    /// Coupling layers, conditioner width and residual depth.
    pub const MAX_LAYERS: usize = 64;
    pub const MAX_WIDTH: usize = 4096;
    pub const MAX_DEPTH: usize = 16;
    /// Total parameters of one flow.
    pub const MAX_PARAMS: usize = 50_000_000;
}

/// Gives, for one sample, the adjoints of its output point (written into the
/// slice) and returns the adjoint of its `log_det`, given the point and `log_det`.
pub type Adjoint<'a, T> = dyn Fn(usize, &[T], T, &mut [T]) -> T + Sync + 'a;

/// What every flow offers the trainer, the CLI and the app.
pub trait Flow<T: Real>: Send + Sync {
    fn dim(&self) -> usize;
    fn params(&self) -> &[T];
    fn params_mut(&mut self) -> &mut [T];

    /// Sampling direction on a batch.
    fn x_from_z(&self, z: &[T], x: &mut [T], log_det: &mut [T]);
    /// Density direction on a batch.
    fn z_from_x(&self, x: &[T], z: &mut [T], log_det: &mut [T]);

    /// `z_from_x` with reverse mode: `adjoint(i, z_i, log_det_i, z_bar_i)` gives
    /// the adjoints of each output; parameter adjoints are added into `grad`.
    fn z_from_x_grad(
        &self,
        x: &[T],
        adjoint: &Adjoint<T>,
        z: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    );
    /// `x_from_z` with reverse mode, as [`Flow::z_from_x_grad`].
    fn x_from_z_grad(
        &self,
        z: &[T],
        adjoint: &Adjoint<T>,
        x: &mut [T],
        log_det: &mut [T],
        grad: &mut [T],
    );

    fn n_params(&self) -> usize {
        self.params().len()
    }
}
