//! Lattice field theory with flows: the phi^4 observables, the HMC reference
//! every flow is checked against, the flow's samples corrected by independent
//! Metropolis-Hastings and importance weights, and the flow designs. The
//! action itself is a target (`crate::target::phi4`).

pub mod design;
pub mod estimates;
pub mod observables;
pub mod reference;
