//! What the playground's views draw, computed from one state of the model:
//! log q on a grid over the view, model samples, and the deformed grid (latent
//! circles and rays, or a square grid, pushed through `x_from_z`). On the CPU
//! it is computed from the model in the frame, or by the run's worker where it
//! trains in one ([`cpu_picture_from`]); on the GPU by the trainer's own
//! kernels inside its task ([`PictureJob`]). The grid's lines are refined where
//! the flow bends them ([`refinement`]); a paused CPU run's density is redrawn
//! finer ([`sharp_size`]).

use crate::app::host::GpuJob;
use crate::flow::grid::{self, DeformedGrid, Refinement};
use crate::flow::{Flow, FlowModel};
use crate::gpu::GpuTrainer;
use crate::rng::Rng;
use crate::stats::log_normal;
use glam::{DVec2, Vec2, vec2};
use std::rc::Rc;

use super::gpu_views::GpuViews;

/// The square of data space the views show.
pub const VIEW: (f64, f64) = (-4.0, 4.0);
/// Model samples drawn over the density.
pub const SAMPLES: usize = 1500;

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
    /// the largest log q of the GPU's heat map, where it draws the density
    /// (the colour bar's top; else the largest of `log_q`)
    pub peak: Option<f32>,
}

impl Picture {
    /// The largest log q the density view shows, if any.
    pub fn peak(&self) -> Option<f32> {
        self.peak.or_else(|| {
            self.log_q
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .reduce(f32::max)
        })
    }
}

/// Grid resolution of the density view per flow: coupling conditioners are
/// costly on the CPU.
pub fn grid_size(model: &FlowModel<f64>) -> usize {
    match model {
        FlowModel::Coupling(_) => 48,
        _ => 96,
    }
}

/// The finest density grid of a paused view.
const SHARP_MAX: usize = 256;
/// What recomputing a paused view's density may cost on the CPU, in
/// microseconds, by [`cost_per_point`]'s estimate.
const SHARP_BUDGET_US: f64 = 150_000.0;

/// Microseconds to evaluate `log q` at one point on one core, estimated from
/// the flow's structure with costs measured on this project's 2-core test
/// machine (float32, one thread): 0.03 us a scalar map of a direct radial
/// stack, 0.065 us with the angle-dependent conditioner (each point builds
/// its own stack), 0.22 us a map of a coupling layer's stacks, and 0.14 ns a
/// conditioner parameter. The radial flow of 64 maps on the spiral measured
/// 4.2 us, the coupling flow of 8 x 128 (299,264 parameters) 56 us.
pub fn cost_per_point(model: &FlowModel<f64>) -> f64 {
    let params = model.as_flow().n_params() as f64;
    match model {
        FlowModel::Radial(r) => match r.spec.conditioner {
            crate::flow::RadialConditioner::Direct => 0.03 * r.spec.stack.len() as f64,
            _ => 0.065 * r.spec.stack.len() as f64 + 1.4e-4 * params,
        },
        FlowModel::Coupling(c) => {
            0.22 * (c.spec.layers * c.spec.stack.len()) as f64 + 1.4e-4 * params
        }
        FlowModel::Elementwise(e) => 0.03 * (e.dim * e.stack.len()) as f64,
        FlowModel::Lattice(_) => 1.4e-4 * params,
    }
}

/// The density grid a paused view is redrawn at on the CPU: as fine as
/// about 150 ms allows by [`cost_per_point`], in steps of 32, from the size
/// a training view is drawn at up to 256. (A fixed estimate, not a timing,
/// so the same run draws the same picture on every machine.)
pub fn sharp_size(model: &FlowModel<f64>) -> usize {
    let affordable = (SHARP_BUDGET_US / cost_per_point(model)).sqrt();
    let n = if affordable.is_finite() {
        affordable as usize / 32 * 32
    } else {
        SHARP_MAX
    };
    n.clamp(grid_size(model), SHARP_MAX)
}

/// `log q` of `model` on an n x n grid over [`VIEW`] (row 0 at the top),
/// computed on the CPU in float32.
pub fn cpu_density(model: &FlowModel<f32>, n: usize) -> Vec<f32> {
    let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
    let mut z = vec![0.0f32; points.len()];
    let mut ld = vec![0.0f32; n * n];
    model.as_flow().z_from_x(&points, &mut z, &mut ld);
    (0..n * n)
        .map(|i| (log_normal(&[z[2 * i] as f64, z[2 * i + 1] as f64]) + ld[i] as f64) as f32)
        .collect()
}

/// The picture of `model` at `step` at the size a training view is drawn at
/// ([`cpu_picture_at`]).
pub fn cpu_picture(model: FlowModel<f64>, step: usize, rng: &mut Rng) -> Picture {
    let n = grid_size(&model);
    cpu_picture_at(model, step, rng, n)
}

/// The picture of `model` at `step`, its density on an n x n grid, computed
/// on the CPU in float32; the samples' latent points come from `rng`.
pub fn cpu_picture_at(model: FlowModel<f64>, step: usize, rng: &mut Rng, n: usize) -> Picture {
    let latent = latent_samples(rng);
    cpu_picture_from(model, step, &latent, n)
}

/// The picture of `model` at `step`, its density on an n x n grid, computed
/// on the CPU in float32, its samples pushed from the `latent` points (as
/// [`latent_samples`] draws them). A training worker draws with this.
pub fn cpu_picture_from(model: FlowModel<f64>, step: usize, latent: &[f32], n: usize) -> Picture {
    let model32: FlowModel<f32> = model.cast();
    let flow = model32.as_flow();
    let log_q = cpu_density(&model32, n);
    let samples = push(flow, latent)
        .chunks(3)
        .map(|p| vec2(p[0], p[1]))
        .collect();
    let geometry = radial_geometry(&model);
    let (lines, center) = grid_lines(geometry);
    let pushed = push(flow, &as_f32(&lines.points));
    let mut deformed = DeformedGrid::new(&lines, &pushed);
    deformed.refine(&refinement(lines.len()), |z| push(flow, &as_f32(z)));
    Picture {
        log_q,
        n,
        samples,
        lines: drawn(&deformed),
        center,
        scale: scales(geometry),
        model: Some((step, model)),
        peak: None,
    }
}

/// The picture of no map at all, the latent space of `model`: the standard
/// normal's density (on an n x n grid), its samples (the same latent points
/// [`cpu_picture`] draws from the same `rng`) and the undeformed grid.
pub fn latent_picture(model: &FlowModel<f64>, rng: &mut Rng, n: usize) -> Picture {
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
        lines: drawn(&DeformedGrid::new(&lines, &unmoved)),
        center,
        scale: scales(geometry),
        model: None,
        peak: None,
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
    /// the model view drawn on the GPU, where the trainer's device draws
    /// the page
    pub gpu_views: Option<Rc<GpuViews>>,
    /// the radial frame a light job's grid follows (the last picture's
    /// model's; a full job reads the model first)
    pub geometry: Option<(DVec2, DVec2)>,
    /// whether the density on the metrics' grid and the model come back too
    pub full: bool,
    /// whether the GPU's heat map is redrawn (the grid and samples always are)
    pub density: bool,
}

impl PictureJob {
    /// A task's picture after `last`: with `gpu_views` the view is drawn on
    /// the device and only a `full` job reads anything back (the density on
    /// the metrics' grid, its peak and the model); without, everything the
    /// views draw comes back. The GPU's heat map is redrawn where `density`.
    pub fn new(
        latent: Vec<f32>,
        gpu_views: Option<Rc<GpuViews>>,
        last: &Picture,
        full: bool,
        density: bool,
    ) -> Self {
        Self {
            latent,
            full: full || gpu_views.is_none(),
            density,
            gpu_views,
            geometry: last.model.as_ref().and_then(|(_, m)| radial_geometry(m)),
        }
    }
}

impl GpuJob for PictureJob {
    /// `None`: the views were drawn on the device, nothing came back
    type Output = Option<Picture>;

    /// The views' data from the GPU kernels: the view drawn on the device
    /// where it can be; log q on the metrics' grid and the model read back
    /// for a full job; samples and the deformed grid through `x_from_z` read
    /// back where the device does not draw them.
    async fn run(self, trainer: &mut GpuTrainer, step: usize) -> Result<Option<Picture>, String> {
        if !self.full {
            if let Some(views) = &self.gpu_views {
                views.draw(trainer, &self.latent, self.geometry, self.density)?;
            }
            return Ok(None);
        }
        // the polar grid follows a radial flow's (trained) centre
        let model = trainer.model_async().await;
        let geometry = radial_geometry(&model);
        if let Some(views) = &self.gpu_views {
            views.draw(trainer, &self.latent, geometry, self.density)?;
        }
        let n = 96;
        let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
        let log_q = trainer.log_q_async(&points).await?;
        let (lines, center) = grid_lines(geometry);
        let mut picture = Picture {
            log_q,
            n,
            center,
            scale: scales(geometry),
            model: Some((step, model)),
            ..Picture::default()
        };
        if let Some(views) = &self.gpu_views {
            picture.peak = Some(views.peak_async().await?);
            return Ok(Some(picture));
        }
        let pushed = trainer.x_from_z_async(&self.latent).await?;
        picture.samples = pushed.chunks(3).map(|p| vec2(p[0], p[1])).collect();
        let pushed_lines = trainer.x_from_z_async(&as_f32(&lines.points)).await?;
        let mut deformed = DeformedGrid::new(&lines, &pushed_lines);
        let rule = refinement(lines.len());
        for _ in 0..rule.rounds {
            let splits = deformed.splits(&rule);
            if splits.is_empty() {
                break;
            }
            let pushed = trainer.x_from_z_async(&as_f32(&splits.latent)).await?;
            deformed.insert(&splits, &pushed);
        }
        picture.lines = drawn(&deformed);
        Ok(Some(picture))
    }
}

/// A radial flow's centre and log-scales (2D), which its polar grid follows.
pub fn radial_geometry(model: &FlowModel<f64>) -> Option<(DVec2, DVec2)> {
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

/// How finely the deformed grid is drawn: a segment is split where its image
/// is longer than 0.4 (about 20 pixels of a 450-pixel view) or turns by more
/// than 7 degrees, in up to six rounds (each halves a segment), to at most
/// three times the points of the grid it started from (`base`).
pub fn refinement(base: usize) -> Refinement {
    Refinement {
        max_length: 0.4,
        max_turn: 0.12,
        rounds: 6,
        max_points: 3 * base,
        view: (VIEW.0 as f32, VIEW.1 as f32),
    }
}

/// Latent coordinates in float32, as the flows take them.
fn as_f32(latent: &[f64]) -> Vec<f32> {
    latent.iter().map(|&v| v as f32).collect()
}

/// A deformed grid's lines as the views draw them: per point x and log det.
fn drawn(grid: &DeformedGrid) -> Vec<Vec<(Vec2, f32)>> {
    grid.pushed
        .iter()
        .map(|line| line.iter().map(|p| (vec2(p[0], p[1]), p[2])).collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bijection::{Family, Stack};
    use crate::flow::{CouplingFlow, CouplingSpec};

    /// A coupling flow that bends space hard (large random conditioner
    /// weights) gets its grid lines refined where they bend: within the
    /// view no drawn segment is longer than the rule allows, unless the
    /// point budget ran out, and the flow's own images are drawn.
    #[test]
    fn a_bent_coupling_flow_is_drawn_with_smooth_grid_lines() {
        let mut rng = Rng::seeded(7);
        let spec = CouplingSpec {
            dim: 2,
            layers: 4,
            width: 16,
            depth: 1,
            stack: Stack::uniform(Family::CubicRational, 2),
        };
        let mut flow = CouplingFlow::<f64>::init(spec, &mut rng).unwrap();
        for v in flow.params_mut() {
            *v += 0.8 * rng.normal();
        }
        let model = FlowModel::Coupling(flow);
        let picture = cpu_picture(model.clone(), 0, &mut rng);
        let (base, _) = grid_lines(None);
        let rule = refinement(base.len());
        let drawn: usize = picture.lines.iter().map(Vec::len).sum();
        assert!(drawn > base.len(), "{drawn} points, none added");
        let long = picture
            .lines
            .iter()
            .flat_map(|line| line.windows(2))
            .filter(|pair| {
                let (a, b) = (pair[0].0, pair[1].0);
                let inside = |p: Vec2| p.abs().max_element() <= VIEW.1 as f32;
                (inside(a) || inside(b)) && a.distance(b) > rule.max_length
            })
            .count();
        assert!(
            long == 0 || drawn == rule.max_points,
            "{long} long segments, {drawn} points"
        );
        // each drawn point is the flow's image of some latent point: the
        // lines' ends are the base grid's ends pushed
        let model32: FlowModel<f32> = model.cast();
        let ends: Vec<f32> = base
            .lines
            .iter()
            .flat_map(|r| [r.start, r.end - 1])
            .flat_map(|i| [base.points[2 * i] as f32, base.points[2 * i + 1] as f32])
            .collect();
        let pushed = push(model32.as_flow(), &ends);
        for (k, line) in picture.lines.iter().enumerate() {
            for (j, point) in [line[0], line[line.len() - 1]].into_iter().enumerate() {
                let e = 3 * (2 * k + j);
                assert!((point.0 - vec2(pushed[e], pushed[e + 1])).length() < 1e-4);
            }
        }
    }
}
