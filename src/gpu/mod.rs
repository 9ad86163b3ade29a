//! The GPU backend: WGSL compute kernels run through wgpu (WebGPU in browsers,
//! Vulkan natively, Mesa's lavapipe on machines without a GPU).
//!
//! The kernels mirror the Rust reference module by module, in float32, with the
//! float32-stable forms of docs/mathematics.md; each has a native test against the CPU reference.

pub mod context;
pub mod coupling;
pub mod error;
pub mod heatmap;
pub mod lattice;
pub mod optimizer;
pub mod plan;
pub mod radial;
pub mod scalar;
pub mod shader;
pub mod specialize;
pub mod trainer;

pub use context::GpuContext;
pub use coupling::GpuCouplingTrainer;
pub use error::GpuError;
pub use lattice::GpuLatticeTrainer;
pub use radial::GpuRadialTrainer;
pub use scalar::ScalarEval;
pub use trainer::GpuTrainer;
