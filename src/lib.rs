//! Flow Playground: normalizing flows built from the analytic bijections of
//! "Analytic Bijections for Smooth and Interpretable Normalizing Flows"
//! (Gerdes & Cheng, ICML 2026), trained live. The mathematics is explained in
//! `docs/mathematics.md`.
//!
//! # Layers
//!
//! The modules form layers: each may use only the modules its row names, all
//! of them further up the table, so the code can be read from the top down and
//! nothing below knows of anything above it. `tests/layering.rs` reads this
//! table and fails when a module imports one it may not.
//!
//! | module | what it is | may use |
//! |---|---|---|
//! | `real` | the float types (f32, f64) the mathematics is generic over | |
//! | `rng` | the seeded random stream | |
//! | `parallel` | work split over the machine's cores | |
//! | `stats` | log-sum-exp, the normal density, ESS/N, IMH acceptance, histograms | rng |
//! | `bijection` | the scalar maps: the three analytic families, the baselines, stacks | real |
//! | `flow` | flows on R^d: radial, coupling, lattice, element-wise; `nn/` conditioners | real, rng, bijection |
//! | `target` | what is learned: sample targets, energies, images, the phi^4 action | real, rng, stats |
//! | `train` | losses, Adam, the `Trainer` interface, the CPU trainer, metrics, a run's loop | real, rng, parallel, stats, bijection, flow, target |
//! | `mcmc` | generic Hamiltonian Monte Carlo and autocorrelation times | rng |
//! | `gpu` | the WGSL kernels through wgpu: trainers and display plans | real, rng, stats, bijection, flow, target, train |
//! | `phi4` | lattice field theory: observables, the HMC reference, flow estimates, designs | rng, stats, bijection, flow, target, train, mcmc |
//! | `run` | a run on a chosen backend, its JSON report, the model file | rng, bijection, flow, target, train, gpu, phi4 |
//! | `cli` | the `flowplay` command-line tool | real, rng, parallel, stats, bijection, flow, target, train, mcmc, gpu, phi4, run |
//! | `app` | the web page and native window (eframe) | real, rng, stats, bijection, flow, target, train, mcmc, gpu, phi4, run |

#[cfg(feature = "app")]
pub mod app;
pub mod bijection;
#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
pub mod flow;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod mcmc;
pub mod parallel;
pub mod phi4;
pub mod real;
pub mod rng;
pub mod run;
pub mod stats;
pub mod target;
pub mod train;
