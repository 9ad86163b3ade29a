//! The structure constants the shaders are specialized for: a stack's families
//! and layout (`lib/stack.wgsl`) and the energy a reverse-KL kernel evaluates
//! (`lib/energy.wgsl`), as values for [`super::shader::compose`].

use super::shader::Value;
use crate::bijection::{Family, Stack};
use crate::gpu::GpuError;
use crate::target::{Target, TargetKind};
use crate::train::Loss;

/// The energy a reverse-KL kernel is compiled for (0: none, forward KL).
pub fn energy_id(loss: Loss, target: &Target) -> Result<u32, GpuError> {
    match (loss, target) {
        (Loss::ForwardKl, t) if t.kind() == TargetKind::Samples => Ok(0),
        (Loss::ForwardKl, t) => Err(GpuError::unsupported(format!(
            "target '{}' has no sampler: train it by reverse KL",
            t.name()
        ))),
        (Loss::ReverseKl, Target::TwoMoonsEnergy) => Ok(1),
        (Loss::ReverseKl, Target::CircularGmm) => Ok(2),
        (Loss::ReverseKl, Target::RingMixture { rings: 2 }) => Ok(3),
        (Loss::ReverseKl, t) => Err(GpuError::unsupported(format!(
            "no GPU energy for target '{}' (the GPU has twomoons-energy, circular-gmm, ring-mixture); use --backend cpu",
            t.name()
        ))),
    }
}

/// The kernels' id of a family (see `lib/stack.wgsl`).
fn family_id(family: Family) -> Result<u32, GpuError> {
    match family {
        Family::CubicRational => Ok(0),
        Family::Sinh => Ok(1),
        Family::Cubic => Ok(2),
        Family::Affine => Ok(3),
        Family::Spline(shape) if shape.bins <= 16 => Ok(4),
        Family::Spline(_) => Err(GpuError::unsupported(
            "the GPU kernels take splines of up to 16 bins",
        )),
    }
}

/// `lib/stack.wgsl`'s values for `stack`: one family (constant-folded) or a
/// mixed stack (per-layer tables). Spline layers of one stack share a shape.
pub fn stack_values(stack: &Stack) -> Result<Vec<Value>, GpuError> {
    let layers = stack.layers();
    let first = *layers
        .first()
        .ok_or_else(|| GpuError::unsupported("the GPU kernels need a non-empty stack"))?;
    let ids = layers
        .iter()
        .map(|&f| family_id(f))
        .collect::<Result<Vec<u32>, GpuError>>()?;
    let mut splines = layers.iter().filter_map(|f| match f {
        Family::Spline(shape) => Some(*shape),
        _ => None,
    });
    let spline = splines.next().unwrap_or_default();
    if splines.any(|s| s != spline) {
        return Err(GpuError::unsupported(
            "the GPU kernels take spline layers of one shape per stack",
        ));
    }
    let widest = layers.iter().map(|f| f.n_raw()).max().unwrap_or(0);
    let layout = if layers.iter().all(|&f| f == first) {
        format!(
            "fn family_of(k: u32) -> u32 {{\n    return {}u;\n}}\n\nfn offset_of(k: u32) -> u32 {{\n    return k * {}u;\n}}",
            ids[0],
            first.n_raw()
        )
    } else {
        let list = |v: Vec<u32>| {
            v.iter()
                .map(|x| format!("{x}u"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let offsets = (0..layers.len())
            .map(|k| stack.layer_range(k).start as u32)
            .collect();
        format!(
            "var<private> stack_families: array<u32, {k}> = array<u32, {k}>({});\n\
             var<private> stack_offsets: array<u32, {k}> = array<u32, {k}>({});\n\n\
             fn family_of(k: u32) -> u32 {{\n    return stack_families[k];\n}}\n\n\
             fn offset_of(k: u32) -> u32 {{\n    return stack_offsets[k];\n}}",
            list(ids),
            list(offsets),
            k = layers.len()
        )
    };
    Ok(vec![
        ("LAYOUT", layout),
        ("K", stack.len().to_string()),
        ("NRAW", stack.n_raw().to_string()),
        ("PF", widest.max(5).to_string()),
        ("SPLINE_BINS", spline.bins.to_string()),
        ("SPLINE_BOUND", format!("{:?}", spline.bound as f32)),
    ])
}

/// `lib/energy.wgsl`'s value for energy `id` (see [`energy_id`]).
pub fn energy_value(id: u32) -> Value {
    ("TARGET", id.to_string())
}
