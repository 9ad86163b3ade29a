//! One training run in the page: the trainer, its loss history, and what the
//! views draw (density grid, samples, the deformed grid), refreshed on a
//! schedule so training keeps most of each frame.
//!
//! A run trains on the GPU where there is one (WebGPU in the browser, Vulkan
//! natively) and on the CPU otherwise. GPU work is asynchronous, since a
//! browser cannot wait for the GPU inside a frame: each frame hands the trainer
//! to a task that runs its steps (and, when due, the view kernels) and hands
//! it back through an inbox; natively the task runs to completion at once.

use super::settings::Settings;
use crate::flow::{FlowModel, grid};
use crate::gpu::{GpuContext, GpuTrainer};
use crate::rng::Rng;
use crate::target::{Target, TargetKind};
use crate::train::metrics::{self, log_normal};
use crate::train::{CpuTrainer, TrainError, TrainSettings, Trainer};
use std::cell::RefCell;
use std::rc::Rc;
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
    /// the radial flow's scales exp(log_scale): its unit ellipse
    pub scale: Option<[f32; 2]>,
    /// the model drawn, and its step
    pub model: Option<(usize, FlowModel<f64>)>,
}

/// How the model does by measures other than its training loss, at one step
/// (each where the target allows it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metrics {
    pub step: usize,
    /// mean -log q of held-out target samples (sample targets)
    pub held_out_nll: Option<f64>,
    /// KL(q || p) (energy targets; estimated where log Z is unknown)
    pub reverse_kl: Option<f64>,
    /// effective sample size of importance weights over N (energy targets)
    pub ess: Option<f64>,
    /// KL(p || q) between target and model on the view's grid (targets
    /// with a known density)
    pub grid_kl: Option<f64>,
}

/// The metrics are measured at most this often while training.
const METRICS_INTERVAL: Duration = Duration::from_millis(300);

/// Held-out samples and flow samples the metrics use.
const METRIC_SAMPLES: usize = 500;

/// What a GPU task hands back to its session.
#[derive(Default)]
struct Inbox {
    /// the trainer, when no task holds it
    trainer: Option<GpuTrainer>,
    losses: Vec<f64>,
    error: Option<String>,
    picture: Option<Picture>,
    checkpoint: Option<(usize, FlowModel<f64>)>,
    steps_done: usize,
    /// seconds the last task's steps took
    seconds: f64,
}

/// Where the run trains.
enum Backend {
    Cpu(Box<dyn Trainer>),
    Gpu(Rc<RefCell<Inbox>>),
}

/// How a run of `settings` on `target` trains.
fn train_settings(settings: &Settings, target: &Target) -> TrainSettings {
    TrainSettings {
        batch: settings.batch,
        learning_rate: settings.learning_rate,
        seed: settings.seed,
        loss: super::settings::loss_for(target, settings.reverse_kl),
        threads: crate::train::default_threads(),
    }
}

/// A trainer for `model`: on `gpu` where it can train this flow and target,
/// else on the CPU; its name for the user (with why not the GPU), and the
/// device it uses.
fn make_backend(
    model: FlowModel<f64>,
    target: &Target,
    train: TrainSettings,
    gpu: Option<GpuContext>,
) -> Result<(Backend, String, Option<GpuContext>), String> {
    let gpu_trainer = match &gpu {
        Some(ctx) => GpuTrainer::new(ctx.clone(), model.clone(), target.clone(), train.clone()),
        None => Err("no GPU".into()),
    };
    Ok(match gpu_trainer {
        Ok(trainer) => {
            let name = trainer.backend();
            let inbox = Inbox {
                trainer: Some(trainer),
                ..Inbox::default()
            };
            (Backend::Gpu(Rc::new(RefCell::new(inbox))), name, gpu)
        }
        Err(reason) => {
            let trainer = CpuTrainer::<f32>::new(model, target.clone(), train)?;
            let name = if reason == "no GPU" {
                trainer.backend()
            } else {
                format!("{} (the GPU cannot: {reason})", trainer.backend())
            };
            (Backend::Cpu(Box::new(trainer)), name, None)
        }
    })
}

/// Runs `task` to completion: natively now, in a browser on its event loop.
pub(super) fn spawn(task: impl std::future::Future<Output = ()> + 'static) {
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_futures::spawn_local(task);
    #[cfg(not(target_arch = "wasm32"))]
    pollster::block_on(task);
}

pub struct Session {
    pub settings: Settings,
    pub target: Target,
    backend_impl: Backend,
    /// the device a GPU run trains on (watched for its loss)
    gpu: Option<GpuContext>,
    /// steps taken before the current trainer took over (after a move
    /// between the GPU and the CPU)
    step_offset: usize,
    /// the learning rate to give the GPU trainer when it is next home
    pending_lr: Option<f64>,
    /// when the views were last recomputed
    last_picture: Option<Instant>,
    /// loss after every step
    pub losses: Vec<f32>,
    pub status: Status,
    pub n_params: usize,
    pub backend: String,
    /// the model at the last checkpoint with a finite loss (every 200 steps)
    checkpoint: Option<(usize, FlowModel<f64>)>,
    pub picture: Picture,
    /// counts picture updates (the app redraws its texture when it changes)
    pub picture_version: u64,
    /// target samples (sample targets) or its density grid (energy targets)
    pub target_samples: Vec<[f32; 2]>,
    pub target_log_density: Vec<f32>,
    rng: Rng,
    /// steps per second over the last frames
    pub steps_per_second: f64,
    /// the metrics at each redraw of the views
    pub metrics: Vec<Metrics>,
    /// how long the last CPU redraw of the views took
    picture_cost: Duration,
    /// when the metrics were last measured
    last_metrics: Option<Instant>,
    /// target samples never trained on (sample targets)
    held_out: Vec<f64>,
    /// the target's log density on a grid of the views (its size, values)
    target_grid: Option<(usize, Vec<f64>)>,
}

/// Grid resolution of the density view per flow: coupling conditioners are
/// costly on the CPU.
fn grid_size(model: &FlowModel<f64>) -> usize {
    match model {
        FlowModel::Coupling(_) => 48,
        _ => 96,
    }
}

/// What a run starts from besides its settings.
#[derive(Clone, Default)]
pub struct Start {
    /// a target the settings cannot name (an uploaded image, a drawing)
    pub target: Option<Target>,
    /// a model to start from (an imported one) instead of a fresh one
    pub model: Option<FlowModel<f64>>,
}

impl Session {
    /// A run of `settings` from `start`, on the GPU of `gpu` where it can
    /// train this flow and target, else on the CPU (with the reason in
    /// `backend`).
    pub fn new(settings: Settings, start: Start, gpu: Option<GpuContext>) -> Result<Self, String> {
        let target = match start.target {
            Some(target) => target,
            None => settings.target()?,
        };
        let mut rng = Rng::seeded(settings.seed);
        let model = match start.model {
            Some(model) => model,
            None => settings.flow_config()?.build(target.dim(), &mut rng)?,
        };
        let n_params = model.as_flow().n_params();
        let train = train_settings(&settings, &target);
        let (backend_impl, backend, gpu) = make_backend(model, &target, train, gpu)?;
        let mut session = Self {
            settings,
            target,
            backend_impl,
            gpu,
            step_offset: 0,
            pending_lr: None,
            last_picture: None,
            losses: Vec::new(),
            status: Status::Paused,
            n_params,
            backend,
            checkpoint: None,
            picture: Picture::default(),
            picture_version: 0,
            target_samples: Vec::new(),
            target_log_density: Vec::new(),
            rng,
            steps_per_second: 0.0,
            metrics: Vec::new(),
            picture_cost: Duration::ZERO,
            last_metrics: None,
            held_out: Vec::new(),
            target_grid: None,
        };
        let mut held_out_rng = Rng::seeded(session.settings.seed ^ 0x6865_6c64);
        if session.target.kind() == TargetKind::Samples {
            session.held_out = session
                .target
                .sample(METRIC_SAMPLES, &mut held_out_rng)
                .unwrap_or_default();
        }
        session.draw_target();
        session.refresh_picture();
        Ok(session)
    }

    /// Takes in what a GPU task handed back (call once a frame; a no-op on
    /// the CPU). While paused it also starts a task to redraw the views when
    /// they are due; while running, `train_for` does that with the steps.
    pub fn poll(&mut self) {
        if let Backend::Gpu(inbox) = &self.backend_impl {
            let inbox = Rc::clone(inbox);
            let launch = self.status != Status::Running;
            self.gpu_frame(&inbox, 0, launch);
        }
    }

    /// Whether the run trains on the GPU.
    pub fn on_gpu(&self) -> bool {
        matches!(self.backend_impl, Backend::Gpu(_))
    }

    pub fn steps_done(&self) -> usize {
        self.step_offset
            + match &self.backend_impl {
                Backend::Cpu(t) => t.steps_done(),
                Backend::Gpu(inbox) => inbox.borrow().steps_done,
            }
    }

    /// The divergence this run minimizes.
    pub fn loss(&self) -> crate::train::Loss {
        super::settings::loss_for(&self.target, self.settings.reverse_kl)
    }

    /// The device this run trains on, if it trains on a GPU.
    pub fn gpu_context(&self) -> Option<&GpuContext> {
        self.gpu.as_ref()
    }

    /// Why the GPU this run trains on was lost, if it was.
    pub fn gpu_lost(&self) -> Option<String> {
        self.gpu.as_ref().and_then(GpuContext::lost)
    }

    /// Moves the run to `gpu`, or to the CPU with `None`, from the model the
    /// views show, keeping its history (Adam's moments start afresh): after
    /// a lost GPU device, or onto a GPU found later.
    pub fn move_to(&mut self, gpu: Option<GpuContext>) -> Result<(), String> {
        let (step, model) = self
            .model()
            .or_else(|| self.checkpoint.clone())
            .ok_or("the model has not come back from the GPU yet")?;
        let train = train_settings(&self.settings, &self.target);
        let (backend_impl, backend, gpu) = make_backend(model, &self.target, train, gpu)?;
        self.backend_impl = backend_impl;
        self.backend = backend;
        self.gpu = gpu;
        self.step_offset = step;
        self.pending_lr = None;
        self.losses.truncate(step);
        self.metrics.retain(|m| m.step <= step);
        self.last_picture = None;
        self.refresh_picture();
        Ok(())
    }

    /// Up to `steps` training steps, stopping early when `budget` is spent
    /// (the page stays responsive whatever the settings).
    pub fn train_for(&mut self, steps: usize, budget: Duration) {
        if let Backend::Gpu(inbox) = &self.backend_impl {
            let inbox = Rc::clone(inbox);
            self.gpu_frame(&inbox, steps, true);
            return;
        }
        let Backend::Cpu(trainer) = &mut self.backend_impl else {
            return;
        };
        let start = Instant::now();
        let mut done = 0;
        while done < steps && start.elapsed() < budget {
            match trainer.step() {
                Ok(loss) if loss.is_finite() && loss < 1e6 => {
                    self.losses.push(loss as f32);
                    let step = self.step_offset + trainer.steps_done();
                    if step.is_multiple_of(200) {
                        self.checkpoint = Some((step, trainer.model()));
                    }
                }
                Ok(loss) => {
                    let step = self.step_offset + trainer.steps_done();
                    self.status = Status::Stopped(diverged(loss, step));
                    return;
                }
                Err(e) => {
                    self.status = Status::Stopped(failed(&e));
                    return;
                }
            }
            done += 1;
        }
        self.record_speed(done, start.elapsed().as_secs_f64());
    }

    /// Folds `done` steps in `seconds` into the smoothed steps per second.
    fn record_speed(&mut self, done: usize, seconds: f64) {
        if done > 0 && seconds > 0.0 {
            let rate = done as f64 / seconds;
            self.steps_per_second = if self.steps_per_second == 0.0 {
                rate
            } else {
                0.8 * self.steps_per_second + 0.2 * rate
            };
        }
    }

    /// The model and its step: the current one on the CPU; on the GPU the one
    /// the views show (read back with them; pausing redraws them).
    pub fn model(&self) -> Option<(usize, FlowModel<f64>)> {
        match &self.backend_impl {
            Backend::Cpu(t) => Some((self.step_offset + t.steps_done(), t.model())),
            Backend::Gpu(_) => self.picture.model.clone(),
        }
    }

    /// The step of the checkpoint "restore" would bring back, if any.
    pub fn checkpoint_step(&self) -> Option<usize> {
        self.checkpoint.as_ref().map(|(s, _)| *s)
    }

    /// Brings back the last checkpoint's parameters.
    pub fn restore_checkpoint(&mut self) -> Result<(), String> {
        let Some((step, model)) = self.checkpoint.clone() else {
            return Err("no checkpoint yet (one is kept every 200 steps)".into());
        };
        self.set_model(&model)?;
        self.losses.truncate(step);
        self.metrics.retain(|m| m.step <= step);
        self.status = Status::Paused;
        Ok(())
    }

    /// Replaces the model's parameters (same structure; the optimizer's
    /// state is kept) and redraws the views: a restore, or a hand edit.
    pub fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        match &mut self.backend_impl {
            Backend::Cpu(t) => t.set_model(model)?,
            Backend::Gpu(inbox) => match inbox.borrow_mut().trainer.as_mut() {
                Some(t) => t.set_model(model)?,
                None => return Err("the GPU is busy; try again".into()),
            },
        }
        self.refresh_picture();
        Ok(())
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.settings.learning_rate = lr;
        match &mut self.backend_impl {
            Backend::Cpu(t) => t.set_learning_rate(lr),
            Backend::Gpu(_) => self.pending_lr = Some(lr),
        }
    }

    /// One frame of GPU training: take in what the last task handed back,
    /// then (with `launch`) hand the trainer to a task for `steps` more steps
    /// and the views, when due.
    fn gpu_frame(&mut self, inbox: &Rc<RefCell<Inbox>>, steps: usize, launch: bool) {
        let (trainer, losses, error, picture, checkpoint, seconds) = {
            let mut b = inbox.borrow_mut();
            if b.trainer.is_none() {
                return; // a task holds it
            }
            (
                b.trainer.take(),
                std::mem::take(&mut b.losses),
                b.error.take(),
                b.picture.take(),
                b.checkpoint.take(),
                b.seconds,
            )
        };
        let Some(mut trainer) = trainer else { return };
        let done = losses.len();
        let first_step = self.step_offset + trainer.steps_done() - done + 1;
        for (i, loss) in losses.into_iter().enumerate() {
            if !(loss.is_finite() && loss < 1e6) {
                self.status = Status::Stopped(diverged(loss, first_step + i));
                break;
            }
            self.losses.push(loss as f32);
        }
        // a lost device is not the run's fault: the app moves it to the CPU
        if let Some(e) = error
            && self.gpu_lost().is_none()
        {
            self.status = Status::Stopped(e);
        }
        if let Some(p) = picture {
            self.picture = p;
            self.picture_version += 1;
            self.record_metrics();
        }
        if checkpoint.is_some() {
            self.checkpoint = checkpoint;
        }
        self.record_speed(done, seconds);
        if let Some(lr) = self.pending_lr.take() {
            trainer.set_learning_rate(lr);
        }
        let picture_due = self.last_picture.is_none();
        if !launch || (steps == 0 && !picture_due) {
            inbox.borrow_mut().trainer = Some(trainer);
            return;
        }
        let plan = picture_due.then(|| self.picture_inputs());
        if picture_due {
            self.last_picture = Some(Instant::now());
        }
        let inbox = Rc::clone(inbox);
        let offset = self.step_offset;
        spawn(async move {
            let start = Instant::now();
            let mut losses = Vec::new();
            let mut error = None;
            let mut checkpoint = None;
            let before = offset + trainer.steps_done();
            match trainer.steps_async(steps).await {
                Ok(done) => losses = done,
                Err(e) => error = Some(failed(&e)),
            }
            let after = offset + trainer.steps_done();
            if after / 200 > before / 200 {
                checkpoint = Some((after, trainer.model_async().await));
            }
            let seconds = start.elapsed().as_secs_f64();
            let picture = match plan {
                Some(inputs) => match gpu_picture(&mut trainer, inputs, offset).await {
                    Ok(p) => Some(p),
                    Err(e) => {
                        error.get_or_insert(format!("the GPU failed while drawing: {e}"));
                        None
                    }
                },
                None => None,
            };
            let mut b = inbox.borrow_mut();
            b.losses.extend(losses);
            b.error = error.or(b.error.take());
            if picture.is_some() {
                b.picture = picture;
            }
            if checkpoint.is_some() {
                b.checkpoint = checkpoint;
            }
            b.seconds = seconds;
            b.steps_done = trainer.steps_done();
            b.trainer = Some(trainer);
        });
    }

    /// Latent points for the views' samples (drawn from the session's stream).
    fn picture_inputs(&mut self) -> PictureInputs {
        PictureInputs {
            n: 96,
            latent: (0..2 * 1500).map(|_| self.rng.normal() as f32).collect(),
        }
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

    /// Recomputes what the views draw from the current model (GPU runs do it
    /// in their next task).
    pub fn refresh_picture(&mut self) {
        let started = Instant::now();
        let model = match &self.backend_impl {
            Backend::Cpu(t) => t.model(),
            Backend::Gpu(inbox) => {
                let inbox = Rc::clone(inbox);
                self.last_picture = None;
                let launch = self.status != Status::Running;
                self.gpu_frame(&inbox, 0, launch);
                return;
            }
        };
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
        let geometry = radial_geometry(&model);
        let scale = geometry.map(|(_, s)| [s[0].exp() as f32, s[1].exp() as f32]);
        let (lines, center) = grid_lines(geometry);
        let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
        let mut pushed = vec![0.0f32; latent.len()];
        let mut ld_g = vec![0.0f32; lines.len()];
        flow.x_from_z(&latent, &mut pushed, &mut ld_g);
        let with_ld: Vec<f32> = (0..lines.len())
            .flat_map(|i| [pushed[2 * i], pushed[2 * i + 1], ld_g[i]])
            .collect();
        let lines = cut_lines(&lines, &with_ld, 3);
        let step = self.steps_done();
        self.picture = Picture {
            log_q,
            n,
            samples,
            lines,
            center,
            scale,
            model: Some((step, model)),
        };
        self.picture_version += 1;
        self.record_metrics();
        self.picture_cost = started.elapsed();
    }

    /// How often the views should be redrawn while training: every frame on
    /// the GPU (its kernels draw them); on the CPU as often as keeps drawing
    /// under a fifth of the time, at least every 300 ms.
    pub fn picture_interval(&self) -> Duration {
        match self.backend_impl {
            Backend::Gpu(_) => Duration::ZERO,
            Backend::Cpu(_) => (self.picture_cost * 4).min(Duration::from_millis(300)),
        }
    }

    /// Measures the model the views show, once per step it was drawn at.
    fn record_metrics(&mut self) {
        let Some((step, model)) = &self.picture.model else {
            return;
        };
        if self.metrics.last().is_some_and(|m| m.step == *step) {
            return;
        }
        // the views may redraw every frame; the metrics cost more (CPU, f64)
        if self.status == Status::Running
            && self
                .last_metrics
                .is_some_and(|t| t.elapsed() < METRICS_INTERVAL)
        {
            return;
        }
        self.last_metrics = Some(Instant::now());
        let flow = model.as_flow();
        let mut m = Metrics {
            step: *step,
            ..Metrics::default()
        };
        if !self.held_out.is_empty() {
            let lq = metrics::log_q(flow, &self.held_out);
            m.held_out_nll = Some(-lq.iter().sum::<f64>() / lq.len() as f64);
        }
        if self.loss() == crate::train::Loss::ReverseKl {
            let mut rng = Rng::seeded(0x6d65_7472 ^ *step as u64);
            if let Some(r) = metrics::reverse_metrics(flow, &self.target, METRIC_SAMPLES, &mut rng)
            {
                m.reverse_kl = Some(r.reverse_kl);
                m.ess = Some(r.ess);
            }
        }
        m.grid_kl = self.grid_kl();
        let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
        m.held_out_nll = finite(m.held_out_nll);
        m.reverse_kl = finite(m.reverse_kl);
        m.ess = finite(m.ess);
        self.metrics.push(m);
    }

    /// KL(p || q) on the picture's grid, both normalized over its cells.
    fn grid_kl(&mut self) -> Option<f64> {
        let n = self.picture.n;
        if n == 0 || !self.target.has_density() {
            return None;
        }
        if self.target_grid.as_ref().is_none_or(|(size, _)| *size != n) {
            let grid = grid_points(n)
                .chunks(2)
                .map(|p| self.target.log_density(p).unwrap_or(f64::NEG_INFINITY))
                .collect();
            self.target_grid = Some((n, grid));
        }
        let (_, log_p) = self.target_grid.as_ref()?;
        let log_q: Vec<f64> = self.picture.log_q.iter().map(|&v| v as f64).collect();
        grid_kl(log_p, &log_q)
    }
}

fn diverged(loss: f64, step: usize) -> String {
    format!(
        "training diverged (loss {loss:.3e} at step {step}); lower the learning rate, or restore the last good state"
    )
}

fn failed(e: &TrainError) -> String {
    format!(
        "{e}; the steps that produced it were undone. Lower the learning rate and play, or restore the last good state"
    )
}

/// What a GPU task needs to draw the views.
struct PictureInputs {
    n: usize,
    latent: Vec<f32>,
}

/// A radial flow's centre and log-scales (2D), which its polar grid follows.
fn radial_geometry(model: &FlowModel<f64>) -> Option<([f64; 2], [f64; 2])> {
    match model {
        FlowModel::Radial(r) => Some((
            [r.center()[0], r.center()[1]],
            [r.log_scale()[0], r.log_scale()[1]],
        )),
        _ => None,
    }
}

/// The deformed grid in latent space: polar around a radial flow's centre,
/// else Cartesian; and the centre to mark.
fn grid_lines(radial: Option<([f64; 2], [f64; 2])>) -> (grid::Polylines, Option<[f32; 2]>) {
    match radial {
        Some((c, s)) => {
            let radii: Vec<f64> = (1..=8).map(|k| 0.4 * k as f64).collect();
            (
                grid::polar(c, s, &radii, 16, 96),
                Some([c[0] as f32, c[1] as f32]),
            )
        }
        None => (grid::cartesian(-3.0, 3.0, 13, 64), None),
    }
}

/// Pushed grid points (x, y, log det per point) cut into the grid's lines.
fn cut_lines(lines: &grid::Polylines, pushed: &[f32], width: usize) -> Vec<Vec<([f32; 2], f32)>> {
    lines
        .lines
        .iter()
        .map(|range| {
            range
                .clone()
                .map(|i| {
                    let p = &pushed[i * width..];
                    ([p[0], p[1]], p[width - 1])
                })
                .collect()
        })
        .collect()
}

/// The views' data from the GPU kernels: log q on the grid, samples and the
/// deformed grid through `x_from_z`.
async fn gpu_picture(
    trainer: &mut GpuTrainer,
    inputs: PictureInputs,
    step_offset: usize,
) -> Result<Picture, String> {
    let n = inputs.n;
    let points: Vec<f32> = grid_points(n).into_iter().map(|v| v as f32).collect();
    let log_q = trainer.log_q_async(&points).await?;
    let pushed = trainer.x_from_z_async(&inputs.latent).await?;
    let samples = pushed.chunks(3).map(|p| [p[0], p[1]]).collect();
    // the polar grid follows a radial flow's (trained) centre
    let model = trainer.model_async().await;
    let geometry = radial_geometry(&model);
    let scale = geometry.map(|(_, s)| [s[0].exp() as f32, s[1].exp() as f32]);
    let (lines, center) = grid_lines(geometry);
    let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
    let pushed_lines = trainer.x_from_z_async(&latent).await?;
    Ok(Picture {
        log_q,
        n,
        samples,
        lines: cut_lines(&lines, &pushed_lines, 3),
        center,
        scale,
        model: Some((step_offset + trainer.steps_done(), model)),
    })
}

/// KL(p || q) between two densities given as log values on the same grid
/// cells, each normalized over the grid (cells where p is 0 add nothing).
pub fn grid_kl(log_p: &[f64], log_q: &[f64]) -> Option<f64> {
    let norm = |v: &[f64]| metrics::logsumexp(v);
    let (zp, zq) = (norm(log_p), norm(log_q));
    if !(zp.is_finite() && zq.is_finite()) {
        return None;
    }
    let kl = log_p
        .iter()
        .zip(log_q)
        .filter(|(p, _)| p.is_finite())
        .map(|(&p, &q)| (p - zp).exp() * ((p - zp) - (q - zq)))
        .sum::<f64>();
    kl.is_finite().then_some(kl.max(0.0))
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

    #[test]
    fn grid_kl_is_zero_for_equal_densities_and_matches_the_formula() {
        let log_p = [0.5f64.ln(), 0.5f64.ln(), f64::NEG_INFINITY];
        assert!(grid_kl(&log_p, &[1.0, 1.0, 1.0]).unwrap() > 0.0);
        // unnormalized q equal to p up to a constant: KL 0
        let shifted: Vec<f64> = [0.5f64.ln(), 0.5f64.ln(), -50.0]
            .iter()
            .map(|v| v + 3.0)
            .collect();
        assert!(grid_kl(&log_p, &shifted).unwrap() < 1e-12);
        // p = (1/2, 1/2, 0), q = (1/4, 1/4, 1/2): KL = log 2
        let log_q = [0.25f64.ln(), 0.25f64.ln(), 0.5f64.ln()];
        assert!((grid_kl(&log_p, &log_q).unwrap() - 2f64.ln()).abs() < 1e-12);
    }
}
