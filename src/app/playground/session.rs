//! One training run in the playground: its trainer (on the GPU or the CPU,
//! through the [`TrainerHost`]), its loss history and metrics, and what the
//! views draw, refreshed on a schedule so training keeps most of each frame.

use super::gpu_views::GpuViews;
use super::picture::{
    Picture, PictureJob, cpu_density, cpu_picture, grid_points, grid_size, latent_samples,
    sharp_size,
};
use super::settings::{Settings, loss_for};
use crate::app::host::worker::protocol::{DrawCut, DrawJob, MeasureJob};
use crate::app::host::{CpuReason, GpuOffer, HostSpec, Progress, TrainerHost, WorkerPicture};
use crate::app::rate::RateMeter;
use crate::flow::FlowModel;
use crate::rng::Rng;
use crate::target::{Target, TargetKind};
use crate::train::metrics::{self, ModelMeasures, grid_kl};
use crate::train::{Loss, TrainSettings};
use std::rc::Rc;
use web_time::{Duration, Instant};

/// Whether the session trains on its own each frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Paused,
    Running,
    /// Training stopped by itself (NaN, divergence); the reason for the user.
    Stopped(String),
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

/// Where the GPU draws the model view on the page's device, the density on
/// the metrics' grid and the model come back this often while training.
const FULL_PICTURE_INTERVAL: Duration = METRICS_INTERVAL;

/// On an emulated GPU the heat map (a flow evaluation per texel) is redrawn
/// this often while training: there it costs as much as many steps.
const EMULATED_DENSITY_INTERVAL: Duration = Duration::from_secs(3);

/// A playing run that makes no step for this long says so.
const STALL: Duration = Duration::from_secs(5);

/// Held-out samples and flow samples the metrics use.
const METRIC_SAMPLES: usize = 500;

/// What a run starts from besides its settings.
#[derive(Clone, Default)]
pub struct Start {
    /// a target the settings cannot name (an uploaded image, a drawing)
    pub target: Option<Target>,
    /// a model to start from (an imported one) instead of a fresh one, and
    /// the steps it has been trained for
    pub model: Option<(usize, FlowModel<f64>)>,
}

pub struct Session {
    pub settings: Settings,
    pub target: Target,
    host: TrainerHost<PictureJob>,
    /// CPU threads the run trains with there
    threads: usize,
    /// the views want a redraw (on the GPU: with the next task)
    picture_wanted: bool,
    /// when the views were last recomputed
    last_picture: Instant,
    /// loss after every step this session took
    pub losses: Vec<f32>,
    /// the steps the model had before this session (an imported model's)
    first_step: usize,
    pub status: Status,
    pub n_params: usize,
    pub picture: Picture,
    /// counts picture updates (the app redraws its texture when it changes)
    pub picture_version: u64,
    /// target samples (sample targets) or its density grid (energy targets)
    pub target_samples: Vec<glam::Vec2>,
    pub target_log_density: Vec<f32>,
    rng: Rng,
    /// steps over the wall clock while running
    step_meter: RateMeter,
    /// the metrics at each redraw of the views
    pub metrics: Vec<Metrics>,
    /// how long the last CPU redraw of the views took
    picture_cost: Duration,
    /// a paused CPU run's density is to be redrawn finer next frame (by its
    /// worker, once the worker has no drawing on its way)
    sharpen: bool,
    /// when the metrics were last measured
    last_metrics: Option<Instant>,
    /// target samples never trained on (sample targets)
    held_out: Vec<f64>,
    /// when a worker was last told how far to train
    last_grant: Option<Instant>,
    /// the worker was last told to train on while playing (a pause halts it)
    worker_playing: bool,
    /// the step the run trains to at most (a side-by-side comparison's budget)
    pub last_step: Option<usize>,
    /// the target's log density on a grid of the views (its size, values)
    target_grid: Option<(usize, Vec<f64>)>,
    /// the model view drawn on the GPU, where the run trains on the device
    /// the page draws with
    gpu_views: Option<Rc<GpuViews>>,
    /// when the last full GPU picture was asked for
    last_full: Option<Instant>,
    /// how many full GPU pictures were asked for
    full_pictures: usize,
    /// when the GPU's heat map was last asked to be redrawn
    last_density: Option<Instant>,
    /// the density grid's side of a training view and of a sharpened one
    /// (both follow from the flow's structure, which a run keeps)
    view_sizes: (usize, usize),
    /// the latent points of the last drawing asked of a worker (a sharpened
    /// redraw shows the same samples)
    worker_latent: Vec<f32>,
    /// the pictures a worker drew
    pictures_from_worker: usize,
    /// the step heard when the worker was last asked to draw
    worker_drawn_at: Option<usize>,
    /// a cut of the model the worker drew ("Layer by layer"), not yet taken
    cut_picture: Option<(usize, Picture)>,
    /// the cuts a worker drew
    cuts_from_worker: usize,
}

/// How a run of `settings` on `target` trains.
fn train_settings(settings: &Settings, target: &Target, threads: usize) -> TrainSettings {
    TrainSettings {
        batch: settings.batch,
        learning_rate: settings.learning_rate,
        seed: settings.seed,
        loss: loss_for(target, settings.reverse_kl),
        threads,
    }
}

impl Session {
    /// A run of `settings` from `start`, on the offered GPU where it can train
    /// this flow and target, else on the CPU (with the reason).
    pub fn new(
        settings: Settings,
        start: Start,
        offer: GpuOffer,
        threads: usize,
    ) -> Result<Self, String> {
        let target = match start.target {
            Some(target) => target,
            None => settings.preset_target()?,
        };
        let mut rng = Rng::seeded(settings.seed);
        let (step, model) = match start.model {
            Some(imported) => imported,
            None => (0, settings.flow_config().build(target.dim(), &mut rng)?),
        };
        let n_params = model.as_flow().n_params();
        let view_sizes = (grid_size(&model), sharp_size(&model));
        let spec = HostSpec {
            model,
            target: target.clone(),
            settings: train_settings(&settings, &target, threads),
            fixed_centre: false,
        };
        let host = TrainerHost::at_step(spec, offer, step)?;
        let mut session = Self {
            settings,
            target,
            host,
            threads,
            picture_wanted: true,
            last_picture: Instant::now(),
            losses: Vec::new(),
            first_step: step,
            status: Status::Paused,
            n_params,
            picture: Picture::default(),
            picture_version: 0,
            target_samples: Vec::new(),
            target_log_density: Vec::new(),
            rng,
            step_meter: RateMeter::new(),
            metrics: Vec::new(),
            picture_cost: Duration::ZERO,
            sharpen: false,
            last_metrics: None,
            held_out: Vec::new(),
            last_grant: None,
            worker_playing: false,
            last_step: None,
            target_grid: None,
            gpu_views: None,
            last_full: None,
            full_pictures: 0,
            last_density: None,
            view_sizes,
            worker_latent: Vec::new(),
            pictures_from_worker: 0,
            worker_drawn_at: None,
            cut_picture: None,
            cuts_from_worker: 0,
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

    /// Whether the run trains on the GPU.
    pub fn on_gpu(&self) -> bool {
        self.host.on_gpu()
    }

    /// Whether the run trains in a worker, off the page's thread.
    pub fn in_worker(&self) -> bool {
        self.host.in_worker()
    }

    /// Whether a reply from the run's worker is still to come.
    pub fn awaiting_worker(&self) -> bool {
        self.host.awaiting_worker()
    }

    pub fn steps_done(&self) -> usize {
        self.host.steps_done()
    }

    /// Where the run trains, e.g. "GPU (llvmpipe, f32)".
    pub fn device(&self) -> &str {
        &self.host.device
    }

    /// Why the run trains on the CPU, when it does.
    pub fn cpu_reason(&self) -> Option<&CpuReason> {
        self.host.cpu_reason.as_ref()
    }

    /// The divergence this run minimizes.
    pub fn loss(&self) -> Loss {
        loss_for(&self.target, self.settings.reverse_kl)
    }

    /// The device a GPU run trains on.
    pub fn gpu_context(&self) -> Option<&crate::gpu::GpuContext> {
        self.host.gpu()
    }

    /// Why the GPU this run trains on was lost, if it was.
    pub fn gpu_lost(&self) -> Option<String> {
        self.host.gpu_lost()
    }

    /// One frame: training steps when running (within `budget`), what the
    /// GPU handed back, and a redraw of the views when one is due.
    pub fn frame(&mut self, budget: Duration) {
        self.frame_steps(budget);
        match self.status {
            Status::Running => self.step_meter.record(self.steps_done()),
            _ => self.step_meter.clear(),
        }
    }

    /// Training steps per second on the wall clock while the run plays.
    pub fn steps_per_second(&self) -> f64 {
        self.step_meter.per_second()
    }

    /// How long a playing run has made no step, once that is long enough
    /// to say so.
    pub fn stalled_for(&self) -> Option<Duration> {
        let idle = self.step_meter.idle_for(Instant::now());
        (self.status == Status::Running && idle >= STALL).then_some(idle)
    }

    fn frame_steps(&mut self, budget: Duration) {
        let running = self.status == Status::Running;
        // no budget: a frame that answers the user trains nothing
        let steps = if running && !budget.is_zero() {
            self.settings.steps_per_frame
        } else {
            0
        };
        if self.host.on_gpu() {
            // every GPU task while running draws the views; paused, when asked
            let job = (!self.host.busy() && (running || self.picture_wanted))
                .then(|| self.picture_job(running));
            let progress = self.host.frame(steps, budget, job);
            self.take(progress);
            return;
        }
        if self.host.in_worker() {
            let steps = if running { self.worker_window() } else { 0 };
            if !running && std::mem::take(&mut self.worker_playing) {
                self.host.halt();
            }
            self.worker_playing |= running;
            let progress = self.host.frame(steps, budget, None);
            let fresh = progress.fresh_model;
            self.take(progress);
            // the views follow the parameters as they come, drawn by the
            // worker: the page's thread only shows them
            let due = self.last_picture.elapsed() >= self.picture_interval();
            // (parameters of the step last drawn, such as the start's, need no
            // drawing of their own)
            let newer = self.worker_drawn_at != Some(self.host.steps_done());
            if fresh && newer && (due || self.status != Status::Running) {
                self.picture_wanted = true;
            }
            if self.picture_wanted {
                self.draw_in_worker(false);
            } else if self.sharpen && !running && self.draw_in_worker(true) {
                self.sharpen = false;
            }
            return;
        }
        if running {
            let progress = self.host.frame(steps, budget, None);
            self.take(progress);
        }
        let stopped_now = running && self.status != Status::Running;
        let due = running && self.last_picture.elapsed() >= self.picture_interval();
        if self.picture_wanted || due || stopped_now {
            self.refresh_picture();
        } else if self.sharpen && !running {
            self.sharpen_picture();
        }
    }

    /// The next GPU task's picture: with the view drawn on the device
    /// only every [`FULL_PICTURE_INTERVAL`] (and whenever asked) a full one,
    /// whose density on the metrics' grid and model come back.
    fn picture_job(&mut self, running: bool) -> PictureJob {
        let latent = latent_samples(&mut self.rng);
        let due = self
            .last_full
            .is_none_or(|t| t.elapsed() >= FULL_PICTURE_INTERVAL);
        let full = !running || self.picture_wanted || due || self.picture.model.is_none();
        if full {
            self.last_full = Some(Instant::now());
            self.full_pictures += 1;
        }
        let emulated = self.gpu_views.as_ref().is_some_and(|v| v.software());
        let density = !emulated
            || !running
            || self.picture_wanted
            || self
                .last_density
                .is_none_or(|t| t.elapsed() >= EMULATED_DENSITY_INTERVAL);
        if density {
            self.last_density = Some(Instant::now());
        }
        self.picture_wanted = false;
        PictureJob::new(latent, self.gpu_views.clone(), &self.picture, full, density)
    }

    /// How many GPU tasks brought the density on the metrics' grid and the
    /// model back (the others, with the view drawn on the device, only
    /// their losses).
    pub fn full_pictures(&self) -> usize {
        self.full_pictures
    }

    /// The model view drawn on the GPU, if the run draws it there.
    pub fn gpu_views(&self) -> Option<&Rc<GpuViews>> {
        self.gpu_views.as_ref()
    }

    /// Draws the model view through `views` from the next GPU task on
    /// (`None`: from the picture read back); a new one is drawn at once.
    pub fn set_gpu_views(&mut self, views: Option<Rc<GpuViews>>) {
        if views.is_some() {
            self.picture_wanted = true;
        }
        self.gpu_views = views;
    }

    /// How far a worker may train beyond the steps heard: "steps / frame"
    /// counted at 60 frames a second over the time since the last frame,
    /// twice over so the worker does not wait for the next frame's grant.
    fn worker_window(&mut self) -> usize {
        let now = Instant::now();
        let since = self
            .last_grant
            .replace(now)
            .map_or(1.0 / 60.0, |t| now.duration_since(t).as_secs_f64());
        let frames = (since * 60.0).clamp(1.0, 30.0);
        let window = (2.0 * frames * self.settings.steps_per_frame as f64).ceil() as usize;
        match self.last_step {
            Some(last) => window.min(last.saturating_sub(self.steps_done())),
            None => window,
        }
    }

    /// Whether the next frame has work without input (a paused view to
    /// redraw finer).
    pub fn wants_frame(&self) -> bool {
        self.sharpen && self.status != Status::Running
    }

    /// Redraws a paused CPU run's density at the finer grid the CPU can
    /// afford ([`sharp_size`]); the samples, the grid lines and the metrics
    /// (measured on the training views' grid) stay.
    fn sharpen_picture(&mut self) {
        self.sharpen = false;
        let Some((_, model)) = &self.picture.model else {
            return;
        };
        let n = sharp_size(model);
        if n <= self.picture.n {
            return;
        }
        self.picture.log_q = cpu_density(&model.cast(), n);
        self.picture.n = n;
        self.picture_version += 1;
    }

    /// One training step now (paused afterwards), and the views redrawn.
    pub fn single_step(&mut self) {
        self.status = Status::Paused;
        // a worker's grant while playing gives way to this one step
        self.worker_playing = false;
        let progress = self.host.frame(1, Duration::from_secs(10), None);
        self.take(progress);
        self.refresh_picture();
    }

    /// Asks the run's worker to draw the views at the training size with
    /// new samples, or `sharp`, finer with the same samples; false when a
    /// drawing is still on its way (or there is no worker).
    fn draw_in_worker(&mut self, sharp: bool) -> bool {
        if self.host.drawing_in_worker() || sharp && self.worker_latent.is_empty() {
            return false;
        }
        let (latent, n) = if sharp {
            (self.worker_latent.clone(), self.view_sizes.1)
        } else {
            (latent_samples(&mut self.rng), self.view_sizes.0)
        };
        // the metrics come with a training-size drawing when they are due
        let measure = (!sharp && self.metrics_due()).then(|| MeasureJob {
            held_out: self.held_out.clone(),
            reverse_samples: if self.loss() == Loss::ReverseKl {
                METRIC_SAMPLES
            } else {
                0
            },
            base: 0,
        });
        let asked = self.host.draw_in_worker(DrawJob {
            latent: latent.clone(),
            n,
            measure,
            cut: None,
        });
        if asked {
            self.worker_latent = latent;
            self.picture_wanted = false;
            self.worker_drawn_at = Some(self.host.steps_done());
        }
        asked
    }

    /// Asks the run's worker to draw `model` (of the run's structure) cut
    /// after its first `maps` maps, its samples pushed from `latent` and its
    /// density on an n x n grid ("Layer by layer"); it comes through
    /// [`Self::take_cut_picture`]. False when a drawing is on its way, or
    /// there is no worker.
    pub fn draw_cut_in_worker(
        &mut self,
        model: &FlowModel<f64>,
        maps: usize,
        latent: Vec<f32>,
        n: usize,
    ) -> bool {
        self.host.draw_in_worker(DrawJob {
            latent,
            n,
            measure: None,
            cut: Some(DrawCut {
                params: model.as_flow().params().to_vec(),
                maps,
            }),
        })
    }

    /// A cut's picture the worker drew, once, with the maps it was cut after.
    pub fn take_cut_picture(&mut self) -> Option<(usize, Picture)> {
        self.cut_picture.take()
    }

    /// Whether a drawing asked of the run's worker is on its way.
    pub fn drawing_in_worker(&self) -> bool {
        self.host.drawing_in_worker()
    }

    /// How many cuts of the model the run's worker drew.
    pub fn cuts_from_worker(&self) -> usize {
        self.cuts_from_worker
    }

    /// How many pictures the run's worker drew (in a worker the page's
    /// thread draws none).
    pub fn pictures_from_worker(&self) -> usize {
        self.pictures_from_worker
    }

    /// Records what training did: losses, a stop, the GPU's picture, the
    /// worker's.
    fn take(&mut self, progress: Progress<Option<Picture>>) {
        self.losses
            .extend(progress.losses.iter().map(|&(_, loss)| loss as f32));
        if let Some(why) = progress.stopped {
            self.status = Status::Stopped(match &progress.divergence {
                Some(_) => format!("{why}. {}", self.settings.divergence_advice()),
                None => why,
            });
        }
        if let Some(picture) = progress.output.flatten() {
            self.picture = picture;
            self.picture_version += 1;
            self.last_picture = Instant::now();
            self.record_metrics();
        }
        if let Some(drawn) = progress.drawn {
            self.take_drawn(drawn);
        }
    }

    /// A picture the worker drew: the views' (with the metrics, where they
    /// came), or a cut's for the "Layer by layer" window.
    fn take_drawn(&mut self, drawn: WorkerPicture) {
        if let Some(maps) = drawn.cut {
            self.cut_picture = Some((maps, drawn.picture));
            self.cuts_from_worker += 1;
            return;
        }
        let sharpened = drawn.picture.n > self.view_sizes.0;
        self.picture = drawn.picture;
        self.picture_version += 1;
        self.pictures_from_worker += 1;
        self.last_picture = Instant::now();
        if !sharpened {
            // a paused run's view is then redrawn finer, where it can be
            let finer = self.view_sizes.1 > self.view_sizes.0;
            self.sharpen = finer && self.status != Status::Running;
            self.picture_cost = Duration::from_secs_f64(drawn.seconds);
        }
        let step = self.picture.model.as_ref().map(|(step, _)| *step);
        if let (Some(measures), Some(step)) = (drawn.measures, step) {
            self.record_measures(step, measures);
        }
    }

    /// Moves the run to the offered GPU, or to the CPU, from the model the
    /// views show, keeping its history (Adam's moments start afresh): after a
    /// lost GPU device, or onto a GPU found later.
    pub fn move_to(&mut self, offer: GpuOffer) -> Result<(), String> {
        let (step, model) = self
            .model()
            .or_else(|| self.host.checkpoint().cloned())
            .ok_or("the model has not come back from the GPU yet")?;
        let spec = HostSpec {
            model,
            target: self.target.clone(),
            settings: train_settings(&self.settings, &self.target, self.threads),
            fixed_centre: false,
        };
        self.host = self.host.moved(spec, step, offer)?;
        self.forget_after(step);
        self.refresh_picture();
        Ok(())
    }

    /// The model and its step: the current one on the CPU; on the GPU the one
    /// the views show (read back with them; pausing redraws them).
    pub fn model(&self) -> Option<(usize, FlowModel<f64>)> {
        self.host.model().or_else(|| self.picture.model.clone())
    }

    /// The step of the checkpoint "restore" would bring back, if any.
    pub fn checkpoint_step(&self) -> Option<usize> {
        self.host.checkpoint_step()
    }

    /// Forgets the losses and metrics after `step` (the run went back there).
    fn forget_after(&mut self, step: usize) {
        self.losses.truncate(step.saturating_sub(self.first_step));
        self.metrics.retain(|m| m.step <= step);
    }

    /// Goes on after a stop from the last good state (the last checkpoint
    /// when the loss drifted away from it) at half the learning rate, running.
    /// Returns the step it goes on from.
    pub fn go_on_at_half_rate(&mut self) -> Result<usize, String> {
        let (step, lr) = self.host.go_on_at_half_rate()?;
        self.settings.learning_rate = lr;
        self.forget_after(step);
        self.status = Status::Running;
        self.refresh_picture();
        Ok(step)
    }

    /// The step "go on" would start from: the last checkpoint's after a drift.
    pub fn go_on_step(&self) -> Option<usize> {
        match self.host.divergence() {
            Some(d) if d.drifted() => self.host.checkpoint_step(),
            _ => Some(self.steps_done()),
        }
    }

    /// Replaces the model's parameters (same structure; the optimizer's
    /// state is kept) and redraws the views: a hand edit.
    pub fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        self.host.set_model(model)?;
        self.refresh_picture();
        Ok(())
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.settings.learning_rate = lr;
        self.host.set_learning_rate(lr);
    }

    fn draw_target(&mut self) {
        let mut rng = Rng::seeded(self.settings.seed ^ 0x7461_7267);
        match self.target.kind() {
            TargetKind::Samples => {
                let xs = self.target.sample(2000, &mut rng).unwrap_or_default();
                self.target_samples = xs
                    .chunks(2)
                    .map(|p| glam::dvec2(p[0], p[1]).as_vec2())
                    .collect();
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
    /// in their next task; a run in a worker asks the worker to draw it).
    pub fn refresh_picture(&mut self) {
        if self.host.in_worker() {
            // the worker draws (as soon as the drawing on its way, if any, is in)
            self.picture_wanted = true;
            self.draw_in_worker(false);
            return;
        }
        let Some((step, model)) = self.host.model() else {
            self.picture_wanted = true;
            return;
        };
        let started = Instant::now();
        self.picture = cpu_picture(model, step, &mut self.rng);
        self.picture_version += 1;
        self.picture_wanted = false;
        self.sharpen = self.status != Status::Running;
        self.last_picture = Instant::now();
        self.record_metrics();
        self.picture_cost = started.elapsed();
    }

    /// How often the views are redrawn while training on the CPU: as often
    /// as keeps drawing under a fifth of the time, and on the page's thread
    /// at least every 300 ms. A worker draws between its steps, so there the
    /// fifth holds however long a drawing takes (a wide coupling flow's
    /// drawing costs many of its steps).
    fn picture_interval(&self) -> Duration {
        let fifth = self.picture_cost * 4;
        if self.host.in_worker() {
            fifth
        } else {
            fifth.min(Duration::from_millis(300))
        }
    }

    /// Whether the metrics are due: while training at most every
    /// [`METRICS_INTERVAL`] (the views may redraw every frame; the metrics
    /// cost more: CPU, f64).
    fn metrics_due(&self) -> bool {
        self.status != Status::Running
            || self
                .last_metrics
                .is_none_or(|t| t.elapsed() >= METRICS_INTERVAL)
    }

    /// Measures the model the views show, once per step it was drawn at.
    fn record_metrics(&mut self) {
        let Some((step, model)) = &self.picture.model else {
            return;
        };
        if self.metrics.last().is_some_and(|m| m.step == *step) || !self.metrics_due() {
            return;
        }
        let reverse = (self.loss() == Loss::ReverseKl).then_some(&self.target);
        let measures = metrics::model_measures(
            model.as_flow(),
            &self.held_out,
            reverse,
            METRIC_SAMPLES,
            *step,
        );
        self.record_measures(*step, measures);
    }

    /// The metrics at `step` from `measures` (computed here or by the run's
    /// worker), with the KL on the picture's grid.
    fn record_measures(&mut self, step: usize, measures: ModelMeasures) {
        if self.metrics.last().is_some_and(|m| m.step == step) {
            return;
        }
        self.last_metrics = Some(Instant::now());
        let m = Metrics {
            step,
            held_out_nll: measures.held_out_nll,
            reverse_kl: measures.reverse_kl,
            ess: measures.ess,
            grid_kl: self.grid_kl(),
        };
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
