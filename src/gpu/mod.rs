//! The GPU backend: WGSL compute kernels run through wgpu (WebGPU in browsers,
//! Vulkan natively, Mesa's lavapipe on machines without a GPU).
//!
//! The kernels mirror the Rust reference module by module, in float32, with the
//! float32-stable forms of docs/mathematics.md; each has a native test against the CPU reference.

pub mod context;
pub mod coupling;
pub mod kernels;
pub mod lattice;
pub mod optimizer;
pub mod radial;
pub mod scalar;
pub mod trainer;

pub use context::GpuContext;
pub use coupling::GpuCouplingTrainer;
pub use lattice::GpuLatticeTrainer;
pub use radial::GpuRadialTrainer;
pub use scalar::ScalarEval;
pub use trainer::GpuTrainer;

/// The WGSL library of scalar bijections, shared by every kernel that needs them.
pub const SCALAR_WGSL: &str = include_str!("shaders/scalar.wgsl");

/// The conditioners' activation, for the kernels of their layers.
const GELU_WGSL: &str = include_str!("shaders/gelu.wgsl");

/// The batch loss and its finiteness check, shared by the flows' kernels.
const SUM_WGSL: &str = include_str!("shaders/sum.wgsl");
