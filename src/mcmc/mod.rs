//! Markov chain Monte Carlo: Hamiltonian Monte Carlo on any potential with a
//! gradient, and the statistics of its chains (integrated autocorrelation
//! times and error bars).

pub mod autocorr;
pub mod hmc;

pub use autocorr::{Estimate, estimate};
