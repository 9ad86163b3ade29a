//! What can be wrong with a scalar map's description.

/// A family name, parameter list or spline shape that does not describe a map.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BijectionError {
    #[error("unknown family '{0}' (expected one of: cubic_rational, sinh, cubic, affine, spline)")]
    UnknownFamily(String),
    #[error("family '{family}' takes {expected} parameters, got {got}")]
    ParamCount {
        family: &'static str,
        expected: usize,
        got: usize,
    },
    #[error(
        "parameter '{param}' = {value} of family '{family}' is outside its constraint ({constraint})"
    )]
    OutsideConstraint {
        param: &'static str,
        value: f64,
        family: &'static str,
        constraint: &'static str,
    },
    #[error("the spline is given by raw parameters only")]
    SplineByRawOnly,
    #[error("a spline needs 2 to {max_bins} bins and a bound in (0, {max_bound}]")]
    SplineShape { max_bins: usize, max_bound: f64 },
}

/// The message, where errors meet a person (the command line, the page).
impl From<BijectionError> for String {
    fn from(e: BijectionError) -> String {
        e.to_string()
    }
}
