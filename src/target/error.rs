//! What can be wrong with a target's description: an unknown name, an image
//! that is not one, or a lattice theory whose action is unbounded below.

/// Why a target cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TargetError {
    #[error("unknown target '{name}' (expected one of: {expected}, or image:PATH)")]
    Unknown { name: String, expected: String },
    #[error("not a PNG or JPEG image: {0}")]
    NotAnImage(String),
    #[error("the image is empty")]
    EmptyImage,
    #[error("pixel weights must be finite and non-negative")]
    BadWeights,
    #[error("the image has no bright pixels: there is no mass to sample")]
    NoMass,
    /// A `phi4:` target's settings, as written (what was wrong with them).
    #[error("phi4: {0}")]
    Phi4Spec(String),
    #[error(
        "the hopping couplings need kappa > 0 and lambda_h >= 0 (got kappa {kappa}, lambda_h {lambda_h})"
    )]
    Hopping { kappa: f64, lambda_h: f64 },
    #[error("the couplings must be finite")]
    NonFiniteCouplings,
    #[error(
        "the action is unbounded below (m^2 {m2}, lambda {lambda}): lambda must be positive, or m^2 positive when lambda is 0"
    )]
    Unbounded { m2: f64, lambda: f64 },
    #[error("the lattice needs at least 2 sites a side (got {0})")]
    LatticeTooSmall(usize),
}

/// The message, where errors meet a person (the command line, the page).
impl From<TargetError> for String {
    fn from(e: TargetError) -> String {
        e.to_string()
    }
}
