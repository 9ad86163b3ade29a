//! Training: what is minimized and how a trainer behaves ([`objective`]),
//! Adam, the CPU trainer, the metrics, a whole run's loop ([`config`]), and
//! the divergence watch ([`watch`]).

pub mod adam;
pub mod config;
pub mod cpu;
pub mod metrics;
pub mod objective;
pub mod watch;

pub use adam::Adam;
pub use cpu::CpuTrainer;
pub use objective::{
    Loss, SetupError, TrainError, TrainSettings, Trainer, default_threads, draw_batch,
};
