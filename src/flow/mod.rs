//! Flows on R^d built from scalar bijections: radial flows (direct and
//! angle-dependent), coupling flows (on coordinates, or on a lattice field with
//! checkerboard masks and convolutions), and an element-wise scalar flow.
//!
//! All batch arrays are row-major, `n x dim`. Directions are named by their
//! spaces: `x_from_z` samples, `z_from_x` evaluates densities. `log_det` is
//! `log |det d(output)/d(input)|` of the direction computed.

pub mod conv;
pub mod coupling;
pub mod elementwise;
pub mod grid;
pub mod lattice;
pub mod mlp;
pub mod model;
pub mod radial;

use crate::real::Real;
pub use coupling::{CouplingFlow, CouplingSpec};
pub use elementwise::ElementwiseFlow;
pub use lattice::{LatticeFlow, LatticeSpec};
pub use model::{FlowConfig, FlowKind, FlowModel};
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

/// GELU, tanh approximation (jax.nn.gelu's default, which bijx uses):
/// `0.5 x (1 + tanh(y))` with `y = sqrt(2/pi) (x + 0.044715 x^3)`, computed as
/// `x sigma(2y)` (the same value; one exponential, no cancellation).
#[inline]
pub fn gelu<T: Real>(x: T) -> T {
    x * gelu_gate(x)
}

/// `sigma(2y)`, the gate of [`gelu`].
#[inline]
fn gelu_gate<T: Real>(x: T) -> T {
    let k = T::c((2.0 / std::f64::consts::PI).sqrt());
    let y2 = T::c(2.0) * k * (x + T::c(0.044715) * x * x * x);
    crate::real::sigmoid(y2)
}

/// Derivative of [`gelu`]: `s + x s (1 - s) 2 y'(x)`, `s = sigma(2y)`.
#[inline]
pub fn gelu_prime<T: Real>(x: T) -> T {
    let k = T::c((2.0 / std::f64::consts::PI).sqrt());
    let s = gelu_gate(x);
    s + x * s * (T::one() - s) * T::c(2.0) * k * (T::one() + T::c(3.0 * 0.044715) * x * x)
}
