//! What the playground's views draw, computed from one state of the model:
//! log q on a grid over the view, model samples, and the deformed grid (latent
//! circles and rays, or a square grid, pushed through `x_from_z`). On the CPU
//! it is computed from the model in the frame; on the GPU by the trainer's own
//! kernels inside its task ([`PictureJob`]).

use crate::app::host::GpuJob;
use crate::flow::{Flow, FlowModel, grid};
use crate::gpu::GpuTrainer;
use crate::rng::Rng;
use crate::stats::log_normal;
use glam::{DVec2, Vec2, vec2};

/// The square of data space the views show.
pub const VIEW: (f64, f64) = (-4.0, 4.0);
/// Model samples drawn over the density.
const SAMPLES: usize = 1500;

/// What the views draw, computed from one state of the model.
#[derive(Default)]
pub struct Picture {
    /// log q on an n x n grid over [`VIEW`], row 0 at the top
    pub log_q: Vec<f32>,
    pub n: usize,
    /// model samples
    pub samples: Vec<Vec2>,
    /// the deformed grid: per line, points and log |det dx/dz| at each
    pub lines: Vec<Vec<(Vec2, f32)>>,
    /// the radial centre, if the flow has one
    pub center: Option<Vec2>,
    /// the radial flow's scales exp(log_scale): its unit ellipse
    pub scale: Option<Vec2>,
    /// the model drawn, and its step
    pub model: Option<(usize, FlowModel<f64>)>,
}

/// Grid resolution of the density view per flow: coupling conditioners are
/// costly on the CPU.
fn grid_size(model: &FlowModel<f64>) -> usize {
    match model {
        FlowModel::Coupling(_) => 48,
        _ => 96,
    }
}

/// The picture of `model` at `step`, computed on the CPU in float32; the
/// samples' latent points come from `rng`.
pub fn cpu_picture(model: FlowModel<f64>, step: usize, rng: &mut Rng) -> Picture {
    let n = grid_size(&model);
    let model32: FlowModel<f32> = model.cast();
    let flow = model32.as_flow();
    let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
    let mut z = vec![0.0f32; points.len()];
    let mut ld = vec![0.0f32; n * n];
    flow.z_from_x(&points, &mut z, &mut ld);
    let log_q = (0..n * n)
        .map(|i| (log_normal(&[z[2 * i] as f64, z[2 * i + 1] as f64]) + ld[i] as f64) as f32)
        .collect();
    let latent = latent_samples(rng);
    let samples = push(flow, &latent)
        .chunks(3)
        .map(|p| vec2(p[0], p[1]))
        .collect();
    let geometry = radial_geometry(&model);
    let (lines, center) = grid_lines(geometry);
    let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
    let pushed = push(flow, &latent);
    Picture {
        log_q,
        n,
        samples,
        lines: cut_lines(&lines, &pushed),
        center,
        scale: scales(geometry),
        model: Some((step, model)),
    }
}

/// The picture of no map at all, the latent space of `model`: the standard
/// normal's density, its samples (the same latent points [`cpu_picture`]
/// draws from the same `rng`) and the undeformed grid.
pub fn latent_picture(model: &FlowModel<f64>, rng: &mut Rng) -> Picture {
    let n = grid_size(model);
    let points = grid_points(n);
    let log_q = points.chunks(2).map(|p| log_normal(p) as f32).collect();
    let samples = latent_samples(rng)
        .chunks(2)
        .map(|p| vec2(p[0], p[1]))
        .collect();
    let geometry = radial_geometry(model);
    let (lines, center) = grid_lines(geometry);
    // the identity map: every point where it was, log det 0
    let unmoved: Vec<f32> = lines
        .points
        .chunks(2)
        .flat_map(|p| [p[0] as f32, p[1] as f32, 0.0])
        .collect();
    Picture {
        log_q,
        n,
        samples,
        lines: cut_lines(&lines, &unmoved),
        center,
        scale: scales(geometry),
        model: None,
    }
}

/// Latent points pushed through `x_from_z`: per point x and log det, as the
/// GPU's display kernels lay them out.
fn push(flow: &dyn Flow<f32>, latent: &[f32]) -> Vec<f32> {
    let n = latent.len() / 2;
    let mut x = vec![0.0f32; latent.len()];
    let mut ld = vec![0.0f32; n];
    flow.x_from_z(latent, &mut x, &mut ld);
    (0..n)
        .flat_map(|i| [x[2 * i], x[2 * i + 1], ld[i]])
        .collect()
}

/// Standard normal latent points for the samples.
pub fn latent_samples(rng: &mut Rng) -> Vec<f32> {
    (0..2 * SAMPLES).map(|_| rng.normal() as f32).collect()
}

/// What a GPU task needs to draw the views.
pub struct PictureJob {
    /// the latent points of the samples
    pub latent: Vec<f32>,
}

impl GpuJob for PictureJob {
    type Output = Picture;

    /// The views' data from the GPU kernels: log q on the grid, samples and
    /// the deformed grid through `x_from_z`.
    async fn run(self, trainer: &mut GpuTrainer, step: usize) -> Result<Picture, String> {
        let n = 96;
        let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
        let log_q = trainer.log_q_async(&points).await?;
        let pushed = trainer.x_from_z_async(&self.latent).await?;
        let samples = pushed.chunks(3).map(|p| vec2(p[0], p[1])).collect();
        // the polar grid follows a radial flow's (trained) centre
        let model = trainer.model_async().await;
        let geometry = radial_geometry(&model);
        let (lines, center) = grid_lines(geometry);
        let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
        let pushed_lines = trainer.x_from_z_async(&latent).await?;
        Ok(Picture {
            log_q,
            n,
            samples,
            lines: cut_lines(&lines, &pushed_lines),
            center,
            scale: scales(geometry),
            model: Some((step, model)),
        })
    }
}

/// A radial flow's centre and log-scales (2D), which its polar grid follows.
fn radial_geometry(model: &FlowModel<f64>) -> Option<(DVec2, DVec2)> {
    match model {
        FlowModel::Radial(r) => Some((
            DVec2::from_slice(&r.center()[..2]),
            DVec2::from_slice(&r.log_scale()[..2]),
        )),
        _ => None,
    }
}

/// A radial flow's scales exp(log_scale).
fn scales(geometry: Option<(DVec2, DVec2)>) -> Option<Vec2> {
    geometry.map(|(_, log_scale)| log_scale.exp().as_vec2())
}

/// The deformed grid in latent space: polar around a radial flow's centre,
/// else Cartesian; and the centre to mark.
fn grid_lines(radial: Option<(DVec2, DVec2)>) -> (grid::Polylines, Option<Vec2>) {
    match radial {
        Some((c, s)) => {
            let radii: Vec<f64> = (1..=8).map(|k| 0.4 * k as f64).collect();
            let lines = grid::polar(c.to_array(), s.to_array(), &radii, 16, 96);
            (lines, Some(c.as_vec2()))
        }
        None => (grid::cartesian(-3.0, 3.0, 13, 64), None),
    }
}

/// Pushed grid points (x, y, log det per point) cut into the grid's lines.
fn cut_lines(lines: &grid::Polylines, pushed: &[f32]) -> Vec<Vec<(Vec2, f32)>> {
    lines
        .lines
        .iter()
        .map(|range| {
            range
                .clone()
                .map(|i| (vec2(pushed[3 * i], pushed[3 * i + 1]), pushed[3 * i + 2]))
                .collect()
        })
        .collect()
}

/// The centres of an n x n grid over [`VIEW`], row 0 at the top (y high).
pub fn grid_points(n: usize) -> Vec<f64> {
    let (lo, hi) = VIEW;
    let at = |k: usize| lo + (hi - lo) * (k as f64 + 0.5) / n as f64;
    (0..n * n)
        .flat_map(|i| [at(i % n), at(n - 1 - i / n)])
        .collect()
}
