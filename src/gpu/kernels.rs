//! Assembling WGSL sources: the scalar stack and the energy targets are shared
//! by the radial and coupling kernels and specialized by string constants.

use crate::bijection::{Family, SplineShape, Stack};
use crate::target::{Target, TargetKind};
use crate::train::Loss;

/// The energy a reverse-KL kernel is compiled for (0: none, forward KL).
pub fn energy_id(loss: Loss, target: &Target) -> Result<u32, String> {
    match (loss, target) {
        (Loss::ForwardKl, t) if t.kind() == TargetKind::Samples => Ok(0),
        (Loss::ForwardKl, t) => Err(format!(
            "target '{}' has no sampler: train it by reverse KL",
            t.name()
        )),
        (Loss::ReverseKl, Target::TwoMoonsEnergy) => Ok(1),
        (Loss::ReverseKl, Target::CircularGmm) => Ok(2),
        (Loss::ReverseKl, Target::RingMixture { rings: 2 }) => Ok(3),
        (Loss::ReverseKl, t) => Err(format!(
            "no GPU energy for target '{}' (the GPU has twomoons-energy, circular-gmm, ring-mixture); use --backend cpu",
            t.name()
        )),
    }
}

/// `stack.wgsl` specialized for `stack` (one family, K layers).
pub fn stack_source(stack: &Stack) -> Result<String, String> {
    let family = *stack
        .layers()
        .first()
        .ok_or("the GPU kernels need a non-empty stack")?;
    if stack.layers().iter().any(|&f| f != family) {
        return Err("the GPU kernels take a stack of one family".into());
    }
    let family_id = match family {
        Family::CubicRational => 0,
        Family::Sinh => 1,
        Family::Cubic => 2,
        Family::Affine => 3,
        Family::Spline(shape) if shape.bins <= 16 => 4,
        other => return Err(format!("no GPU kernel for family '{}'", other.name())),
    };
    let spline = match family {
        Family::Spline(shape) => shape,
        _ => SplineShape::default(),
    };
    Ok(include_str!("shaders/stack.wgsl")
        .replace("{K}", &stack.len().to_string())
        .replace("{P}", &family.n_raw().to_string())
        .replace("{FAMILY}", &family_id.to_string())
        .replace("{PF}", &family.n_raw().max(5).to_string())
        .replace("{SPLINE_BINS}", &spline.bins.to_string())
        .replace("{SPLINE_BOUND}", &format!("{:?}", spline.bound as f32)))
}

/// `energy.wgsl` specialized for energy `id` (see [`energy_id`]).
pub fn energy_source(id: u32) -> String {
    include_str!("shaders/energy.wgsl").replace("{TARGET}", &id.to_string())
}
