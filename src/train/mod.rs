//! Training: losses, Adam, metrics, and the CPU trainer behind the [`Trainer`]
//! interface that the GPU backend shares.

pub mod adam;
pub mod metrics;
pub mod phi4;
pub mod run;
pub mod trainer;

pub use adam::Adam;
pub use trainer::{CpuTrainer, Loss, TrainError, TrainSettings, Trainer, default_threads};
