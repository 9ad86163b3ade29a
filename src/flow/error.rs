//! What can be wrong with a flow's description.

use super::lattice::MAX_HEAD_BOUND;
use super::limits::{MAX_DEPTH, MAX_DIM, MAX_LAYERS, MAX_PARAMS, MAX_WIDTH};
use super::nn::conv::MAX_KERNEL;
use crate::bijection::BijectionError;

/// A flow kind, structure or parameter vector that does not describe a flow
/// this module can run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FlowError {
    #[error(
        "unknown flow '{0}' (expected one of: radial, radial-fourier, coupling, elementwise, lattice)"
    )]
    UnknownKind(String),
    #[error("the stack needs 1 to {max} layers")]
    StackSize { max: usize },
    #[error("a {flow} flow needs dimension {min} to {MAX_DIM}")]
    Dimension { flow: &'static str, min: usize },
    #[error("a {flow} flow needs a scalar transform of at least one layer")]
    EmptyStack { flow: &'static str },
    #[error("the angle-dependent (Fourier) radial flow is 2D only")]
    FourierNot2d,
    #[error("the Fourier conditioner needs order 1 to {max}")]
    FourierOrder { max: usize },
    #[error("the {what} has {got} coordinates, the flow has {dim}")]
    Coordinates {
        what: &'static str,
        got: usize,
        dim: usize,
    },
    #[error("{flow} flow expects {expected} parameters, got {got}")]
    ParamCount {
        flow: &'static str,
        expected: usize,
        got: usize,
    },
    #[error(
        "a coupling flow needs 1 to {MAX_LAYERS} layers, width 1 to {MAX_WIDTH} and depth 0 to {MAX_DEPTH}"
    )]
    CouplingShape,
    #[error("this coupling flow would have {0} parameters; the limit is {MAX_PARAMS}")]
    TooManyParams(usize),
    #[error("a lattice flow needs an even side from 2 to {max}, got {got}")]
    LatticeSide { max: usize, got: usize },
    #[error(
        "a lattice flow needs 1 to {MAX_LAYERS} layers, 1 to {max_channels} channels (a channel list of 1 to {} layers), depth 0 to {MAX_DEPTH}, an odd kernel side of 1 to {MAX_KERNEL} and a head bound of 0 to {MAX_HEAD_BOUND}", MAX_DEPTH + 1
    )]
    LatticeShape { max_channels: usize },
    #[error("a lattice flow needs a square lattice field, got dimension {0}")]
    NotSquare(usize),
    #[error("the Z2-equivariant lattice flow needs families with an odd form (not the spline)")]
    NoOddForm,
    #[error(transparent)]
    Bijection(#[from] BijectionError),
}

/// The message, where errors meet a person (the command line, the page).
impl From<FlowError> for String {
    fn from(e: FlowError) -> String {
        e.to_string()
    }
}
