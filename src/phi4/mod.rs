//! Lattice field theory with flows: the phi^4 observables, the HMC reference
//! every flow is checked against, the flow's samples corrected by independent
//! Metropolis-Hastings and importance weights, and the flow designs. The
//! action itself is a target (`crate::target::phi4`).

pub mod design;
pub mod estimates;
pub mod observables;
pub mod reference;

/// Why a flow's samples cannot be measured.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EstimateError {
    #[error("the flow is {flow}-dimensional but the lattice has {sites} sites")]
    Dimension { flow: usize, sites: usize },
    #[error("{values} field values for {samples} samples of {sites} sites")]
    FieldCount {
        values: usize,
        samples: usize,
        sites: usize,
    },
    #[error("at least 2 flow samples are needed")]
    TooFewSamples,
    #[error("every flow sample has zero weight (the flow is far from the target)")]
    ZeroWeight,
}

/// The message, where errors meet a person (the command line, the page).
impl From<EstimateError> for String {
    fn from(e: EstimateError) -> String {
        e.to_string()
    }
}
