//! Markov chain Monte Carlo: the reference sampler every phi^4 flow result is
//! compared with (Hamiltonian Monte Carlo), and the statistics of its chains.

pub mod autocorr;
pub mod flow_estimates;
pub mod hmc;
pub mod phi4_run;

pub use autocorr::{Estimate, estimate};
