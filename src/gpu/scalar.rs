//! One scalar bijection applied to a batch on the GPU: the building block the
//! flow kernels use, and the first kernel checked against the CPU reference.

use super::GpuContext;
use crate::bijection::Family;

/// The `scalar_eval` kernel.
pub struct ScalarEval {
    pipeline: wgpu::ComputePipeline,
}

const WORKGROUP: u32 = 64;

impl ScalarEval {
    pub fn new(ctx: &GpuContext) -> Self {
        Self {
            pipeline: ctx.pipeline("scalar_eval", include_str!("shaders/scalar_eval.wgsl")),
        }
    }

    /// [`Self::run_async`], waiting for the GPU (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(
        &self,
        ctx: &GpuContext,
        family: Family,
        raw: &[f32],
        points: &[f32],
        sampling: bool,
    ) -> Result<Vec<(f32, f32)>, String> {
        pollster::block_on(self.run_async(ctx, family, raw, points, sampling))
    }

    /// `(output, log f')` for every point, with one set of raw parameters;
    /// `sampling` selects `x_from_z` (else `z_from_x`). Analytic families only.
    pub async fn run_async(
        &self,
        ctx: &GpuContext,
        family: Family,
        raw: &[f32],
        points: &[f32],
        sampling: bool,
    ) -> Result<Vec<(f32, f32)>, String> {
        let id: u32 = match family {
            Family::CubicRational => 0,
            Family::Sinh => 1,
            Family::Cubic => 2,
            Family::Affine => 3,
            other => return Err(format!("no GPU kernel for family '{}' yet", other.name())),
        };
        if raw.len() != family.n_raw() {
            return Err(format!(
                "family '{}' takes {} raw parameters",
                family.name(),
                family.n_raw()
            ));
        }
        if points.is_empty() {
            return Ok(Vec::new());
        }
        let n = points.len() as u32;
        let settings = [id, u32::from(!sampling), n, 0];
        let settings = ctx.uniform("settings", bytemuck::cast_slice(&settings));
        let raw = ctx.storage("raw", bytemuck::cast_slice(raw), false);
        let input = ctx.storage("points", bytemuck::cast_slice(points), false);
        let output = ctx.storage("out", &vec![0u8; points.len() * 8], true);
        let bind = ctx.bind(&self.pipeline, &[&settings, &raw, &input, &output]);
        ctx.dispatch(&self.pipeline, &bind, n.div_ceil(WORKGROUP));
        let bytes = ctx.read_back_async(&output, 0, output.size()).await?;
        let values: &[f32] = bytemuck::cast_slice(&bytes);
        Ok(values.chunks(2).map(|p| (p[0], p[1])).collect())
    }
}
