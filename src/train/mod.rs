//! Training: what is minimized and how a trainer behaves ([`objective`]),
//! Adam, the CPU trainer, the metrics, and a whole run's loop ([`config`]).

pub mod adam;
pub mod config;
pub mod cpu;
pub mod metrics;
pub mod objective;

pub use adam::Adam;
pub use cpu::CpuTrainer;
pub use objective::{Loss, SetupError, TrainError, TrainSettings, Trainer, default_threads};
