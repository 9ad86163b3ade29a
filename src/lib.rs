//! Flow Playground: normalizing flows built from the analytic bijections of
//! "Analytic Bijections for Smooth and Interpretable Normalizing Flows"
//! (Gerdes & Cheng, ICML 2026), trained live.
//!
//! Layers, from the bottom up: [`real`] (the float types), [`bijection`] (scalar
//! maps), [`flow`] (radial and coupling flows), [`target`] (what is learned),
//! [`train`] (losses, Adam, metrics, the CPU trainer), [`mcmc`] (Hamiltonian
//! Monte Carlo and chain statistics: the phi^4 reference), [`model_file`] (the
//! JSON model format), [`cli`] (the command-line tool).

#[cfg(feature = "app")]
pub mod app;
pub mod bijection;
#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
pub mod flow;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod mcmc;
pub mod model_file;
pub mod parallel;
pub mod real;
pub mod rng;
pub mod target;
pub mod train;
