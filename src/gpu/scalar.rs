//! One scalar bijection applied to a batch on the GPU: the building block the
//! flow kernels use, and the first kernel checked against the CPU reference.

use super::GpuContext;
use crate::bijection::{Family, Stack};
use crate::gpu::GpuError;

/// The `scalar_eval` kernel, compiled per family on first use.
pub struct ScalarEval {
    pipelines: std::cell::RefCell<Vec<(Family, wgpu::ComputePipeline)>>,
}

const WORKGROUP: u32 = 64;

impl ScalarEval {
    pub fn new(_ctx: &GpuContext) -> Self {
        Self {
            pipelines: Default::default(),
        }
    }

    fn pipeline(
        &self,
        ctx: &GpuContext,
        family: Family,
    ) -> Result<wgpu::ComputePipeline, GpuError> {
        if let Some((_, p)) = self.pipelines.borrow().iter().find(|(f, _)| *f == family) {
            return Ok(p.clone());
        }
        let values = super::specialize::stack_values(&Stack::uniform(family, 1))?;
        let source = super::shader::compose("scalar_eval.wgsl", &values)?;
        let pipeline = ctx.pipeline_at("scalar_eval", &source, "main");
        self.pipelines.borrow_mut().push((family, pipeline.clone()));
        Ok(pipeline)
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
    ) -> Result<Vec<(f32, f32)>, GpuError> {
        pollster::block_on(self.run_async(ctx, family, raw, points, sampling))
    }

    /// `(output, log f')` for every point, with one set of raw parameters;
    /// `sampling` selects `x_from_z` (else `z_from_x`). Every family, the
    /// spline (up to 16 bins) included.
    pub async fn run_async(
        &self,
        ctx: &GpuContext,
        family: Family,
        raw: &[f32],
        points: &[f32],
        sampling: bool,
    ) -> Result<Vec<(f32, f32)>, GpuError> {
        if let Family::Spline(shape) = family {
            shape
                .validate()
                .map_err(|e| GpuError::unsupported(e.to_string()))?;
        }
        if raw.len() != family.n_raw() {
            return Err(GpuError::unsupported(format!(
                "family '{}' takes {} raw parameters",
                family.name(),
                family.n_raw()
            )));
        }
        let pipeline = self.pipeline(ctx, family)?;
        if points.is_empty() {
            return Ok(Vec::new());
        }
        let n = points.len() as u32;
        let settings = [u32::from(!sampling), n, 0, 0];
        let settings = ctx.uniform("settings", bytemuck::cast_slice(&settings));
        let raw = ctx.storage("raw", bytemuck::cast_slice(raw), false);
        let input = ctx.storage("points", bytemuck::cast_slice(points), false);
        let output = ctx.storage("out", &vec![0u8; points.len() * 8], true);
        let bind = ctx.bind(&pipeline, &[&settings, &raw, &input, &output]);
        ctx.dispatch(&pipeline, &bind, n.div_ceil(WORKGROUP));
        let bytes = ctx.read_back_async(&output, 0, output.size()).await?;
        let values: &[f32] = bytemuck::cast_slice(&bytes);
        Ok(values.chunks(2).map(|p| (p[0], p[1])).collect())
    }
}
