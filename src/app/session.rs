//! One training run in the page: the trainer, its loss history, and what the
//! views draw (density grid, samples, the deformed grid), refreshed on a
//! schedule so training keeps most of each frame.

use super::settings::Settings;
use crate::flow::{FlowModel, grid};
use crate::rng::Rng;
use crate::target::{Target, TargetKind};
use crate::train::metrics::log_normal;
use crate::train::{CpuTrainer, TrainError, TrainSettings, Trainer};
use web_time::{Duration, Instant};

/// The square of data space the views show.
pub const VIEW: (f64, f64) = (-4.0, 4.0);

/// Whether the session trains on its own each frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Paused,
    Running,
    /// Training stopped by itself (NaN, divergence); the reason for the user.
    Stopped(String),
}

/// What the views draw, computed from one state of the model.
#[derive(Default)]
pub struct Picture {
    /// log q on an n x n grid over [`VIEW`], row 0 at the top
    pub log_q: Vec<f32>,
    pub n: usize,
    /// model samples (x, y)
    pub samples: Vec<[f32; 2]>,
    /// the deformed grid: per line, points and log |det dx/dz| at each
    pub lines: Vec<Vec<([f32; 2], f32)>>,
    /// the radial centre, if the flow has one
    pub center: Option<[f32; 2]>,
}

pub struct Session {
    pub settings: Settings,
    pub target: Target,
    trainer: Box<dyn Trainer>,
    /// loss after every step
    pub losses: Vec<f32>,
    pub status: Status,
    pub n_params: usize,
    pub backend: String,
    /// the model at the last checkpoint with a finite loss (every 200 steps)
    checkpoint: Option<(usize, FlowModel<f64>)>,
    pub picture: Picture,
    /// target samples (sample targets) or its density grid (energy targets)
    pub target_samples: Vec<[f32; 2]>,
    pub target_log_density: Vec<f32>,
    rng: Rng,
    /// steps per second over the last frames
    pub steps_per_second: f64,
}

/// Grid resolution of the density view per flow: coupling conditioners are
/// costly on the CPU.
fn grid_size(model: &FlowModel<f64>) -> usize {
    match model {
        FlowModel::Coupling(_) => 48,
        _ => 96,
    }
}

impl Session {
    pub fn new(settings: Settings) -> Result<Self, String> {
        let target = settings.target()?;
        let flow = settings.flow_config()?;
        let mut rng = Rng::seeded(settings.seed);
        let model = flow.build(target.dim(), &mut rng)?;
        let train = TrainSettings {
            batch: settings.batch,
            learning_rate: settings.learning_rate,
            seed: settings.seed,
            loss: settings.loss()?,
            threads: 1,
        };
        let n_params = model.as_flow().n_params();
        let trainer: Box<dyn Trainer> =
            Box::new(CpuTrainer::<f32>::new(model, target.clone(), train)?);
        let backend = trainer.backend();
        let mut session = Self {
            settings,
            target,
            trainer,
            losses: Vec::new(),
            status: Status::Paused,
            n_params,
            backend,
            checkpoint: None,
            picture: Picture::default(),
            target_samples: Vec::new(),
            target_log_density: Vec::new(),
            rng,
            steps_per_second: 0.0,
        };
        session.draw_target();
        session.refresh_picture();
        Ok(session)
    }

    pub fn steps_done(&self) -> usize {
        self.trainer.steps_done()
    }

    /// Up to `steps` training steps, stopping early when `budget` is spent
    /// (the page stays responsive whatever the settings).
    pub fn train_for(&mut self, steps: usize, budget: Duration) {
        let start = Instant::now();
        let mut done = 0;
        while done < steps && start.elapsed() < budget {
            match self.trainer.step() {
                Ok(loss) if loss.is_finite() && loss < 1e6 => {
                    self.losses.push(loss as f32);
                    let step = self.trainer.steps_done();
                    if step.is_multiple_of(200) {
                        self.checkpoint = Some((step, self.trainer.model()));
                    }
                }
                Ok(loss) => {
                    self.status = Status::Stopped(format!(
                        "training diverged (loss {loss:.3e} at step {}); lower the learning rate, or restore the last good state",
                        self.trainer.steps_done()
                    ));
                    return;
                }
                Err(e @ (TrainError::NonFinite { .. } | TrainError::Backend(_))) => {
                    self.status = Status::Stopped(format!(
                        "{e}; the model is as before that step. Lower the learning rate and play, or restore the last good state"
                    ));
                    return;
                }
            }
            done += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        if done > 0 && seconds > 0.0 {
            let rate = done as f64 / seconds;
            self.steps_per_second = if self.steps_per_second == 0.0 {
                rate
            } else {
                0.8 * self.steps_per_second + 0.2 * rate
            };
        }
    }

    /// The step of the checkpoint "restore" would bring back, if any.
    pub fn checkpoint_step(&self) -> Option<usize> {
        self.checkpoint.as_ref().map(|(s, _)| *s)
    }

    /// Brings back the last checkpoint's parameters.
    pub fn restore_checkpoint(&mut self) -> Result<(), String> {
        let Some((step, model)) = &self.checkpoint else {
            return Err("no checkpoint yet (one is kept every 200 steps)".into());
        };
        self.trainer.set_model(model)?;
        self.losses.truncate(*step);
        self.status = Status::Paused;
        self.refresh_picture();
        Ok(())
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.settings.learning_rate = lr;
        self.trainer.set_learning_rate(lr);
    }

    /// The current model, in float64.
    pub fn model(&self) -> FlowModel<f64> {
        self.trainer.model()
    }

    fn draw_target(&mut self) {
        let mut rng = Rng::seeded(self.settings.seed ^ 0x7461_7267);
        match self.target.kind() {
            TargetKind::Samples => {
                let xs = self.target.sample(2000, &mut rng).unwrap_or_default();
                self.target_samples = xs.chunks(2).map(|p| [p[0] as f32, p[1] as f32]).collect();
            }
            TargetKind::Energy => {
                let n = 96;
                self.target_log_density = grid_points(n)
                    .chunks(2)
                    .map(|p| {
                        self.target
                            .log_density(p)
                            .map_or(f32::NEG_INFINITY, |v| v as f32)
                    })
                    .collect();
            }
        }
    }

    /// Recomputes what the views draw from the current model (on the CPU).
    pub fn refresh_picture(&mut self) {
        let model = self.trainer.model();
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
        let latent: Vec<f32> = (0..2 * 1500).map(|_| self.rng.normal() as f32).collect();
        let mut x = vec![0.0f32; latent.len()];
        let mut ld_s = vec![0.0f32; 1500];
        flow.x_from_z(&latent, &mut x, &mut ld_s);
        let samples = x.chunks(2).map(|p| [p[0], p[1]]).collect();
        let (lines, center) = match &model {
            FlowModel::Radial(r) => {
                let c = [r.center()[0], r.center()[1]];
                let s = [r.log_scale()[0], r.log_scale()[1]];
                let radii: Vec<f64> = (1..=8).map(|k| 0.4 * k as f64).collect();
                (
                    grid::polar(c, s, &radii, 16, 96),
                    Some([c[0] as f32, c[1] as f32]),
                )
            }
            _ => (grid::cartesian(-3.0, 3.0, 13, 64), None),
        };
        let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
        let mut pushed = vec![0.0f32; latent.len()];
        let mut ld_g = vec![0.0f32; lines.len()];
        flow.x_from_z(&latent, &mut pushed, &mut ld_g);
        let lines = lines
            .lines
            .iter()
            .map(|range| {
                range
                    .clone()
                    .map(|i| ([pushed[2 * i], pushed[2 * i + 1]], ld_g[i]))
                    .collect()
            })
            .collect();
        self.picture = Picture {
            log_q,
            n,
            samples,
            lines,
            center,
        };
    }
}

/// The centres of an n x n grid over [`VIEW`], row 0 at the top (y high).
pub fn grid_points(n: usize) -> Vec<f64> {
    let (lo, hi) = VIEW;
    let at = |k: usize| lo + (hi - lo) * (k as f64 + 0.5) / n as f64;
    (0..n * n)
        .flat_map(|i| [at(i % n), at(n - 1 - i / n)])
        .collect()
}
