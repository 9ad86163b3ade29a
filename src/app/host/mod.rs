//! One trainer host for both pages: a run's trainer on the CPU, stepped inside
//! the frame within a time budget, or on the GPU, handed to an asynchronous
//! task with its steps and, when asked, a job that draws what the views need.
//! A browser cannot wait for the GPU inside a frame, so what a task produces
//! comes back through an inbox a frame or two later; natively the task runs to
//! completion at once. A CPU run can also train in a [`worker`] (in a
//! browser, a Web Worker), its replies taken in once a frame like a GPU
//! task's. Divergence, checkpoints and moving a run between the
//! GPU and the CPU are handled here, once: [`offer`] (where a run may train,
//! or why it trains on the CPU), [`progress`] (what a run starts with, what a
//! frame hands back), [`schedule`] (when checkpoints are kept).

mod in_worker;
pub mod offer;
pub mod progress;
pub mod schedule;
pub mod worker;

pub use offer::{CpuReason, GpuOffer};
pub use progress::{GpuJob, HostSpec, Progress, WorkerPicture, WorkerSamples};
pub use schedule::CHECKPOINT_EVERY;

use super::web::spawn;
use crate::flow::FlowModel;
use crate::gpu::{GpuContext, GpuTrainer};
use crate::train::watch::{Divergence, LossWatch, Verdict};
use crate::train::{CpuTrainer, TrainError, Trainer};
use schedule::{EARLY_CHECKPOINTS, checkpoint_between, checkpoint_due};
use std::cell::RefCell;
use std::rc::Rc;
use web_time::{Duration, Instant};

/// What a GPU task hands back.
struct Returned<O> {
    losses: Vec<f64>,
    first_step: usize,
    output: Option<O>,
    error: Option<String>,
    checkpoint: Option<(usize, FlowModel<f64>)>,
    seconds: f64,
}

/// The GPU trainer's home between tasks, and what the last task returned.
struct Inbox<O> {
    /// the trainer, when no task holds it
    trainer: Option<GpuTrainer>,
    returned: Option<Returned<O>>,
    steps_done: usize,
}

enum Backend<O> {
    /// on the CPU, stepped inside the frame
    Cpu(Box<dyn Trainer>),
    /// on the CPU in a worker, off the page's thread
    Worker(Box<in_worker::WorkerRun>),
    Gpu(Rc<RefCell<Inbox<O>>>),
}

/// A run's trainer, wherever it trains.
pub struct TrainerHost<J: GpuJob> {
    backend: Backend<J::Output>,
    /// where it trains, e.g. "GPU (llvmpipe, f32)" or "CPU (2 threads, f32)"
    pub device: String,
    /// why it trains on the CPU, when it does
    pub cpu_reason: Option<CpuReason>,
    gpu: Option<GpuContext>,
    /// the run's step when the trainer's own count was 0: the steps taken
    /// before it took over (after a move or an import), less the steps a
    /// restored checkpoint undid
    step_base: i64,
    learning_rate: f64,
    /// a learning rate for the GPU trainer when it is next home
    pending_lr: Option<f64>,
    /// the most steps the next GPU task takes, sized to the frame budget
    /// at the measured pace ([`Self::paced_to_budget`]), or no limit but the
    /// caller's (the steps run on the GPU's own timeline: in a browser they
    /// do not hold up the frame)
    gpu_steps: Option<usize>,
    /// the parameters at the last checkpoint (at first the model the run
    /// started from)
    checkpoint: Option<(usize, FlowModel<f64>)>,
    /// the loss so far, watched for divergence
    watch: LossWatch,
    /// the latest verdict on the loss (a checkpoint is kept only when
    /// healthy; a divergence stops the run)
    verdict: Verdict,
}

impl<J: GpuJob> TrainerHost<J> {
    /// A trainer for `spec` on the offered GPU where its kernels can train
    /// this flow and target, else on the CPU, with the reason.
    pub fn new(spec: HostSpec, offer: GpuOffer) -> Result<Self, String> {
        Self::at_step(spec, offer, 0)
    }

    /// As [`Self::new`], for a run that has already taken `step_offset` steps
    /// (an imported model, a run moved between devices).
    pub fn at_step(spec: HostSpec, offer: GpuOffer, step_offset: usize) -> Result<Self, String> {
        let offer = match offer {
            Ok(_) if spec.fixed_centre => Err(CpuReason::FixedCentre),
            Ok(ctx) => match ctx.lost() {
                Some(why) => Err(CpuReason::Lost(why)),
                None => Ok(ctx),
            },
            Err(reason) => Err(reason),
        };
        let start = (step_offset, spec.model.clone());
        let learning_rate = spec.settings.learning_rate;
        let fixed_centre = spec.fixed_centre;
        let reason = match offer {
            Ok(ctx) => {
                let built = GpuTrainer::new(
                    ctx.clone(),
                    spec.model.clone(),
                    spec.target.clone(),
                    spec.settings.clone(),
                );
                match built {
                    Ok(trainer) => {
                        let device = trainer.backend();
                        let inbox = Inbox {
                            trainer: Some(trainer),
                            returned: None,
                            steps_done: 0,
                        };
                        let backend = Backend::Gpu(Rc::new(RefCell::new(inbox)));
                        let mut host = Self::starting(backend, device, start, learning_rate);
                        host.gpu = Some(ctx);
                        return Ok(host);
                    }
                    Err(why) => CpuReason::Unsupported(why),
                }
            }
            Err(reason) => reason,
        };
        let dim = spec.target.dim();
        // built here first so a run the trainer refuses fails now, wherever it trains
        let mut trainer = CpuTrainer::<f32>::new(
            spec.model.clone(),
            spec.target.clone(),
            spec.settings.clone(),
        )?;
        let (backend, device) = match worker::spawn() {
            Ok(channel) => {
                let (run, device) = in_worker::WorkerRun::start(spec, channel);
                (Backend::Worker(Box::new(run)), device)
            }
            Err(_) => {
                if fixed_centre {
                    trainer.freeze(0..dim);
                }
                let device = trainer.backend();
                (Backend::Cpu(Box::new(trainer)), device)
            }
        };
        let mut host = Self::starting(backend, device, start, learning_rate);
        host.cpu_reason = Some(reason);
        Ok(host)
    }

    /// A CPU run of `spec` in the worker at the end of `channel` (the page
    /// makes its workers through [`worker::spawn`]; a test may bring its own).
    pub fn in_worker_at(spec: HostSpec, channel: Box<dyn worker::Channel>) -> Result<Self, String> {
        // built here so a run the trainer refuses fails now
        CpuTrainer::<f32>::new(
            spec.model.clone(),
            spec.target.clone(),
            spec.settings.clone(),
        )?;
        let start = (0, spec.model.clone());
        let learning_rate = spec.settings.learning_rate;
        let (run, device) = in_worker::WorkerRun::start(spec, channel);
        let host = Self::starting(Backend::Worker(Box::new(run)), device, start, learning_rate);
        Ok(host)
    }

    /// A host for `backend` at the start of its training: `start` is the
    /// run's step and model then (its first checkpoint).
    fn starting(
        backend: Backend<J::Output>,
        device: String,
        start: (usize, FlowModel<f64>),
        learning_rate: f64,
    ) -> Self {
        Self {
            backend,
            device,
            cpu_reason: None,
            gpu: None,
            step_base: start.0 as i64,
            learning_rate,
            pending_lr: None,
            gpu_steps: None,
            checkpoint: Some(start),
            watch: LossWatch::new(),
            verdict: Verdict::Healthy,
        }
    }

    /// Sizes each GPU task's steps to the frame budget at the measured pace
    /// (starting at one step), for runs that share the frame with others.
    pub fn paced_to_budget(mut self) -> Self {
        self.gpu_steps = Some(1);
        self
    }

    /// Whether the run trains on the GPU.
    pub fn on_gpu(&self) -> bool {
        matches!(self.backend, Backend::Gpu(_))
    }

    /// Whether the run trains in a worker (its steps and parameters come
    /// back a frame or more later).
    pub fn in_worker(&self) -> bool {
        matches!(self.backend, Backend::Worker(_))
    }

    /// Whether the page waits for a worker's reply (it should look again
    /// soon even when nothing else asks for a frame).
    pub fn awaiting_worker(&self) -> bool {
        match &self.backend {
            Backend::Worker(run) => run.awaiting(),
            _ => false,
        }
    }

    /// Pauses a run in a worker now, rather than when the steps it may take
    /// run out (elsewhere nothing trains between frames).
    pub fn halt(&mut self) {
        let base = self.step_base;
        if let Backend::Worker(run) = &mut self.backend {
            run.halt(base);
        }
    }

    /// Whether a GPU task holds the trainer now.
    pub fn busy(&self) -> bool {
        match &self.backend {
            Backend::Cpu(_) | Backend::Worker(_) => false,
            Backend::Gpu(inbox) => inbox.borrow().trainer.is_none(),
        }
    }

    /// Steps taken so far (on the GPU: as far as the inbox has heard).
    pub fn steps_done(&self) -> usize {
        let trained = match &self.backend {
            Backend::Cpu(t) => t.steps_done(),
            Backend::Worker(run) => run.steps_done,
            Backend::Gpu(inbox) => inbox.borrow().steps_done,
        };
        run_step(self.step_base, trained)
    }

    /// The device a GPU run trains on.
    pub fn gpu(&self) -> Option<&GpuContext> {
        self.gpu.as_ref()
    }

    /// Why the GPU this run trains on was lost, if it was.
    pub fn gpu_lost(&self) -> Option<String> {
        self.gpu.as_ref().and_then(GpuContext::lost)
    }

    /// Adam's step size now.
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }

    /// The step size of the following steps (on the GPU from its next task).
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.learning_rate = lr;
        match &mut self.backend {
            Backend::Cpu(t) => t.set_learning_rate(lr),
            Backend::Worker(run) => run.set_learning_rate(lr),
            Backend::Gpu(_) => self.pending_lr = Some(lr),
        }
    }

    /// The model now, with its step: on the CPU at once; in a worker the
    /// latest it sent (a fraction of a second old while training); on the
    /// GPU `None` (its jobs read the model back with the views).
    pub fn model(&self) -> Option<(usize, FlowModel<f64>)> {
        match &self.backend {
            Backend::Cpu(t) => Some((self.steps_done(), t.model())),
            Backend::Worker(run) => {
                Some((run_step(self.step_base, run.latest.0), run.latest.1.clone()))
            }
            Backend::Gpu(_) => None,
        }
    }

    /// Replaces the parameters (same structure; the optimizer's state is kept).
    pub fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        match &mut self.backend {
            Backend::Cpu(t) => Ok(t.set_model(model)?),
            Backend::Worker(run) => run.set_model(model),
            Backend::Gpu(inbox) => match inbox.borrow_mut().trainer.as_mut() {
                Some(t) => Ok(t.set_model(model)?),
                None => Err("the GPU is busy; try again".into()),
            },
        }
    }

    /// The step of the checkpoint [`Self::restore_checkpoint`] brings back.
    pub fn checkpoint_step(&self) -> Option<usize> {
        self.checkpoint.as_ref().map(|(step, _)| *step)
    }

    /// The last checkpoint, if any.
    pub fn checkpoint(&self) -> Option<&(usize, FlowModel<f64>)> {
        self.checkpoint.as_ref()
    }

    /// Brings back the last checkpoint's parameters; returns its step.
    pub fn restore_checkpoint(&mut self) -> Result<usize, String> {
        let Some((step, model)) = self.checkpoint.clone() else {
            return Err(format!(
                "no checkpoint yet (the first is kept at step {})",
                EARLY_CHECKPOINTS[0]
            ));
        };
        self.set_model(&model)?;
        // the run's count goes back to the checkpoint's step
        self.step_base -= (self.steps_done() - step.min(self.steps_done())) as i64;
        self.watch_afresh();
        Ok(step)
    }

    /// Goes on after a stop from the last good state at half the learning
    /// rate: after a climb or a jump the parameters are bad, so the last
    /// checkpoint comes back; after an overflow the trainer has already undone
    /// the step. Returns the step the run goes on from and the new rate.
    pub fn go_on_at_half_rate(&mut self) -> Result<(usize, f64), String> {
        let step = match self.divergence() {
            Some(d) if d.drifted() => self.restore_checkpoint()?,
            _ => self.steps_done(),
        };
        self.watch_afresh();
        let lr = 0.5 * self.learning_rate;
        self.set_learning_rate(lr);
        Ok((step, lr))
    }

    /// The divergence that stopped the run, until it goes on.
    pub fn divergence(&self) -> Option<&Divergence> {
        match &self.verdict {
            Verdict::Diverged(d) => Some(d),
            _ => None,
        }
    }

    /// Records what the watch makes of step `step`'s loss; the divergence, if any.
    fn watch_loss(&mut self, loss: f64, step: usize) -> Option<Divergence> {
        self.verdict = self.watch.observe(loss, step);
        self.divergence().cloned()
    }

    /// Watches the loss from scratch (the run went back to a good state).
    fn watch_afresh(&mut self) {
        self.watch = LossWatch::new();
        self.verdict = Verdict::Healthy;
    }

    /// One frame of training: up to `steps` steps within `budget`. On the CPU
    /// they run now. In a worker this takes in its replies and lets it train
    /// up to `steps` beyond the steps heard (the budget is the worker's own
    /// business). On the GPU this takes in what the last task handed back
    /// and, when the trainer is home, hands it a task for the next `steps`
    /// steps (fewer when paced to the budget) followed by `job`. A job given while a task holds the trainer is dropped.
    pub fn frame(&mut self, steps: usize, budget: Duration, job: Option<J>) -> Progress<J::Output> {
        match &self.backend {
            Backend::Cpu(_) => self.cpu_frame(steps, budget),
            Backend::Worker(_) => self.worker_frame(steps),
            Backend::Gpu(inbox) => {
                let inbox = Rc::clone(inbox);
                self.gpu_frame(&inbox, steps, budget, job)
            }
        }
    }

    fn cpu_frame(&mut self, steps: usize, budget: Duration) -> Progress<J::Output> {
        let mut progress = Progress::default();
        let start = Instant::now();
        while progress.losses.len() < steps && start.elapsed() < budget {
            let Backend::Cpu(trainer) = &mut self.backend else {
                break;
            };
            let step = run_step(self.step_base, trainer.steps_done()) + 1;
            let loss = match trainer.step() {
                Ok(loss) => loss,
                Err(e) => {
                    progress.stopped = Some(stop_reason(&e));
                    break;
                }
            };
            if let Some(d) = self.watch_loss(loss, step) {
                progress.stopped = Some(d.to_string());
                progress.divergence = Some(d);
                break;
            }
            progress.losses.push((step, loss));
            if checkpoint_due(step)
                && self.verdict == Verdict::Healthy
                && let Backend::Cpu(trainer) = &self.backend
            {
                self.checkpoint = Some((step, trainer.model()));
            }
        }
        progress.seconds = start.elapsed().as_secs_f64();
        progress
    }

    fn gpu_frame(
        &mut self,
        inbox: &Rc<RefCell<Inbox<J::Output>>>,
        steps: usize,
        budget: Duration,
        job: Option<J>,
    ) -> Progress<J::Output> {
        let (trainer, returned) = {
            let mut home = inbox.borrow_mut();
            if home.trainer.is_none() {
                return Progress::default(); // a task holds it
            }
            (home.trainer.take(), home.returned.take())
        };
        let Some(mut trainer) = trainer else {
            return Progress::default();
        };
        let progress = match returned {
            Some(back) => self.take_back(back, budget),
            None => Progress::default(),
        };
        if let Some(lr) = self.pending_lr.take() {
            trainer.set_learning_rate(lr);
        }
        let steps = if progress.stopped.is_some() {
            0
        } else {
            steps.min(self.gpu_steps.unwrap_or(usize::MAX))
        };
        if steps == 0 && job.is_none() {
            inbox.borrow_mut().trainer = Some(trainer);
            return progress;
        }
        let inbox = Rc::clone(inbox);
        let base = self.step_base;
        spawn(async move {
            let before = run_step(base, trainer.steps_done());
            let start = Instant::now();
            let (losses, mut error) = match trainer.steps_async(steps).await {
                Ok(losses) => (losses, None),
                Err(e) => (Vec::new(), Some(stop_reason(&e))),
            };
            let seconds = start.elapsed().as_secs_f64();
            let after = run_step(base, trainer.steps_done());
            let checkpoint = if checkpoint_between(before, after) {
                Some((after, trainer.model_async().await))
            } else {
                None
            };
            let output = match job {
                Some(job) if error.is_none() => match job.run(&mut trainer, after).await {
                    Ok(output) => Some(output),
                    Err(e) => {
                        error = Some(format!("the GPU failed while drawing: {e}"));
                        None
                    }
                },
                _ => None,
            };
            let mut home = inbox.borrow_mut();
            home.returned = Some(Returned {
                losses,
                first_step: before + 1,
                output,
                error,
                checkpoint,
                seconds,
            });
            home.steps_done = trainer.steps_done();
            home.trainer = Some(trainer);
        });
        progress
    }

    /// What a task handed back, checked for divergence; sizes the next task.
    fn take_back(&mut self, back: Returned<J::Output>, budget: Duration) -> Progress<J::Output> {
        let mut progress = Progress {
            seconds: back.seconds,
            output: back.output,
            ..Progress::default()
        };
        for (step, loss) in (back.first_step..).zip(back.losses) {
            if let Some(d) = self.watch_loss(loss, step) {
                progress.stopped = Some(d.to_string());
                progress.divergence = Some(d);
                break;
            }
            progress.losses.push((step, loss));
        }
        if let Some(pace) = &mut self.gpu_steps
            && !progress.losses.is_empty()
        {
            let per_step = back.seconds / progress.losses.len() as f64;
            let fit = (budget.as_secs_f64() / per_step.max(1e-6)) as usize;
            *pace = fit.max(1);
        }
        // a lost device is not the run's fault: the page moves it to the CPU
        if let Some(e) = back.error
            && self.gpu_lost().is_none()
        {
            progress.stopped.get_or_insert(e);
        }
        // a checkpoint read while the loss was unhealthy is no good state
        if back.checkpoint.is_some()
            && progress.stopped.is_none()
            && self.verdict == Verdict::Healthy
        {
            self.checkpoint = back.checkpoint;
        }
        progress
    }

    /// The same run from `model` at `step` on the offered GPU or the CPU
    /// (Adam's moments start afresh): after a lost device, or onto a GPU
    /// found later. The model it moves with is its first checkpoint, unless
    /// the run had stopped: then the last good one is kept.
    pub fn moved(
        &self,
        spec: HostSpec,
        step: usize,
        offer: GpuOffer,
    ) -> Result<TrainerHost<J>, String> {
        let mut host = Self::at_step(spec, offer, step)?;
        if self.divergence().is_some() {
            host.checkpoint = self.checkpoint.clone();
            host.verdict = self.verdict.clone();
        }
        host.gpu_steps = self.gpu_steps.map(|_| 1);
        Ok(host)
    }
}

/// The run's step after the trainer's own `trained` steps, from its base.
fn run_step(base: i64, trained: usize) -> usize {
    (base + trained as i64).max(0) as usize
}

/// Why a failed step stops the run, for the user.
pub fn stop_reason(e: &TrainError) -> String {
    format!(
        "{e}; the steps that produced it were undone. Lower the learning rate and play, or restore the last good state"
    )
}
