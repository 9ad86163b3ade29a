//! A run training in a worker ([`worker`]): the page's record of what the
//! worker has said (its step count, its latest parameters), and the frame
//! that takes in its replies and tells it how far to go. Replies come a
//! frame or more after the steps; the loss is watched and checkpoints are
//! kept here as they arrive, as for the other trainers.

use super::schedule::checkpoint_due;
use super::worker::Channel;
use super::worker::protocol::{
    DrawJob, Drawn, FromWorker, MeasureJob, Sampled, ToWorker, Trained, WorkerSpec,
};
use super::{
    Backend, GpuJob, HostSpec, Progress, TrainerHost, WorkerPicture, WorkerSamples, run_step,
};
use crate::flow::FlowModel;
use crate::train::watch::Verdict;
use crate::train::{CpuTrainer, Trainer, default_threads};

/// The device label of a run in a worker at `place` with `helpers` helpers.
fn worker_device(place: &str, helpers: usize) -> String {
    match helpers {
        0 => format!("CPU ({place}, f32)"),
        1 => format!("CPU ({place} + 1 helper, f32)"),
        n => format!("CPU ({place} + {n} helpers, f32)"),
    }
}

/// The page's side of a run in a worker.
pub(super) struct WorkerRun {
    channel: Box<dyn Channel>,
    /// what the run was started with (a failed worker's run goes on in the
    /// page from its last parameters)
    spec: HostSpec,
    /// the trainer's own step count, as far as heard
    pub(super) steps_done: usize,
    /// the latest parameters heard, with the trainer's count then
    pub(super) latest: (usize, FlowModel<f64>),
    /// the generation of the parameters the page set last: replies about
    /// older ones are passed over
    generation: u64,
    /// the count heard when the page last set the parameters (the steps the
    /// worker took after it were undone by the replacement)
    set_at: Option<usize>,
    /// the last limit sent
    until_sent: Option<usize>,
    /// a drawing of the views was asked for and has not come
    drawing: bool,
    /// flow samples were asked for and have not come
    sampling: bool,
}

impl WorkerRun {
    /// Starts `spec`'s run in the worker at the end of `channel`; also
    /// returns the device's label.
    pub(super) fn start(spec: HostSpec, channel: Box<dyn Channel>) -> (Self, String) {
        let worker_spec = WorkerSpec::from_host(&spec);
        channel.post(&ToWorker::Start(worker_spec.clone()));
        let device = worker_device(channel.place(), worker_spec.helpers);
        let latest = (0, spec.model.clone());
        let run = Self {
            channel,
            spec,
            steps_done: 0,
            latest,
            generation: 0,
            set_at: None,
            until_sent: None,
            drawing: false,
            sampling: false,
        };
        (run, device)
    }

    /// Whether a reply is still to come: steps granted but not heard, an
    /// edit not yet answered, a drawing or samples asked for (the page keeps
    /// taking replies while paused until they are in).
    pub(super) fn awaiting(&self) -> bool {
        self.set_at.is_some()
            || self.until_sent.is_some_and(|until| until > self.steps_done)
            || self.drawing
            || self.sampling
    }

    /// Stops the worker at the steps heard (those in flight still come).
    pub(super) fn halt(&mut self, base: i64) {
        if self.until_sent != Some(self.steps_done) {
            self.channel.post(&ToWorker::Train {
                until: self.steps_done,
                base,
            });
            self.until_sent = Some(self.steps_done);
        }
    }

    pub(super) fn set_learning_rate(&mut self, lr: f64) {
        self.spec.settings.learning_rate = lr;
        self.channel.post(&ToWorker::SetLearningRate(lr));
    }

    /// Replaces the parameters: at once for the page, with the worker's next
    /// reply there.
    pub(super) fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), String> {
        if !self.spec.model.same_structure(model) {
            return Err("the model does not have the run's structure".into());
        }
        self.generation += 1;
        self.channel.post(&ToWorker::SetModel {
            generation: self.generation,
            params: model.as_flow().params().to_vec(),
        });
        self.latest = (self.steps_done, model.clone());
        self.set_at = Some(self.steps_done);
        self.until_sent = None;
        Ok(())
    }
}

impl<J: GpuJob> TrainerHost<J> {
    /// Asks a run's worker to draw `job`: the views of its parameters as they
    /// stand, or of a cut of the page's (the samples pushed from its latent
    /// points, the density on an n x n grid), with the metrics where asked
    /// (their step base is set here, the host's); they come with a later
    /// frame's [`Progress::drawn`]. False when the run does not train in a
    /// worker, or a drawing is still to come.
    pub fn draw_in_worker(&mut self, job: DrawJob) -> bool {
        let base = self.step_base;
        let Backend::Worker(run) = &mut self.backend else {
            return false;
        };
        if run.drawing {
            return false;
        }
        // while an edit's answer is on its way the worker's step base is not
        // yet the page's, so the measures' seed could miss their step: none
        let measure = job
            .measure
            .filter(|_| run.set_at.is_none())
            .map(|m| MeasureJob { base, ..m });
        run.channel
            .post(&ToWorker::Draw(DrawJob { measure, ..job }));
        run.drawing = true;
        true
    }

    /// Whether a drawing asked of the run's worker is still to come.
    pub fn drawing_in_worker(&self) -> bool {
        matches!(&self.backend, Backend::Worker(run) if run.drawing)
    }

    /// Whether flow samples asked of the run's worker are still to come.
    pub fn sampling_in_worker(&self) -> bool {
        matches!(&self.backend, Backend::Worker(run) if run.sampling)
    }

    /// Asks a run's worker to push `latent` (n x V standard normals) through
    /// its flow as it stands, before any further step it has not yet begun
    /// (ask before granting more); they come with a later frame's
    /// [`Progress::sampled`]. False when the run does not train in a worker,
    /// or samples are still to come.
    pub fn sample_in_worker(&mut self, latent: Vec<f64>) -> bool {
        let Backend::Worker(run) = &mut self.backend else {
            return false;
        };
        if run.sampling {
            return false;
        }
        run.channel.post(&ToWorker::Sample { latent });
        run.sampling = true;
        true
    }

    /// One frame of a run in a worker: takes in its replies, then lets it
    /// train up to `steps` beyond the step heard before them (no further
    /// than heard after a stop; `steps` 0 leaves the last grant as it was).
    pub(super) fn worker_frame(&mut self, steps: usize) -> Progress<J::Output> {
        let mut progress = Progress::default();
        // the grant counts from the step the caller knew
        let target = self.steps_done() + steps;
        let Backend::Worker(run) = &mut self.backend else {
            return progress;
        };
        for reply in run.channel.take() {
            match reply {
                FromWorker::Failed(why) => {
                    progress.stopped = Some(self.move_into_page(&why));
                    return progress;
                }
                FromWorker::Trained(trained) => self.take_trained(trained, &mut progress),
                FromWorker::Drawn(drawn) => self.take_drawn(*drawn, &mut progress),
                FromWorker::Sampled(sampled) => self.take_sampled(sampled, &mut progress),
                // only a lead hears these; a page that does has the wrong worker
                FromWorker::PartsDone(_) => {
                    progress.stopped =
                        Some(self.move_into_page("it answered like a helper worker"));
                    return progress;
                }
            }
        }
        let stop = progress.stopped.is_some() || self.divergence().is_some();
        let Backend::Worker(run) = &mut self.backend else {
            return progress;
        };
        let until = if stop {
            run.steps_done
        } else if steps == 0 {
            // paused: the steps already granted (a single step) still come
            return progress;
        } else {
            (target as i64 - self.step_base).max(0) as usize
        };
        if run.until_sent != Some(until) {
            run.channel.post(&ToWorker::Train {
                until,
                base: self.step_base,
            });
            run.until_sent = Some(until);
        }
        progress
    }

    /// One reply: its losses watched, its parameters kept (and at a
    /// checkpoint step, kept as the checkpoint while the loss is healthy).
    fn take_trained(&mut self, trained: Trained, progress: &mut Progress<J::Output>) {
        let Backend::Worker(run) = &mut self.backend else {
            return;
        };
        if let Some(helpers) = trained.helpers {
            // the helpers actually started (a browser may refuse them)
            self.device = worker_device(run.channel.place(), helpers);
        }
        if trained.generation < run.generation {
            return;
        }
        if let Some(at) = run.set_at.take() {
            // the steps taken after the replacement was asked for were undone
            self.step_base -= trained.steps_done.saturating_sub(at) as i64;
            run.steps_done = trained.steps_done;
        }
        let first = run.steps_done;
        run.steps_done = trained.steps_done;
        progress.seconds += trained.seconds;
        let healthy_before = self.divergence().is_none() && progress.stopped.is_none();
        if healthy_before {
            for (k, loss) in trained.losses.iter().enumerate() {
                let step = run_step(self.step_base, first + k + 1);
                if let Some(d) = self.watch_loss(*loss, step) {
                    progress.stopped = Some(d.to_string());
                    progress.divergence = Some(d);
                    break;
                }
                progress.losses.push((step, *loss));
            }
        }
        if let Some(e) = trained.error {
            progress.stopped.get_or_insert(e);
        }
        let Backend::Worker(run) = &mut self.backend else {
            return;
        };
        let Some(params) = trained.params else {
            return;
        };
        let model = match run.spec.model.with_params(params) {
            Ok(model) => model,
            Err(e) => {
                progress
                    .stopped
                    .get_or_insert(format!("the worker's parameters do not fit: {e}"));
                return;
            }
        };
        let step = run_step(self.step_base, trained.steps_done);
        let healthy = progress.stopped.is_none() && self.verdict == Verdict::Healthy;
        if healthy_before && healthy && checkpoint_due(step) {
            self.checkpoint = Some((step, model.clone()));
        }
        run.latest = (trained.steps_done, model);
        progress.fresh_model = true;
    }

    /// The views a worker drew, with the model they show (a drawing of
    /// parameters the page has since replaced is passed over).
    fn take_drawn(&mut self, drawn: Drawn, progress: &mut Progress<J::Output>) {
        let Backend::Worker(run) = &mut self.backend else {
            return;
        };
        run.drawing = false;
        if drawn.generation < run.generation {
            return;
        }
        match run.spec.model.with_params(drawn.params) {
            Ok(model) => {
                let step = run_step(self.step_base, drawn.steps_done);
                progress.drawn = Some(WorkerPicture {
                    picture: drawn.views.into_picture(step, model),
                    measures: drawn.measures,
                    cut: drawn.cut,
                    seconds: drawn.seconds,
                });
            }
            Err(e) => {
                progress
                    .stopped
                    .get_or_insert(format!("the worker's drawing does not fit the run: {e}"));
            }
        }
    }

    /// Flow samples a worker pushed (samples of parameters the page has
    /// since replaced are passed over).
    fn take_sampled(&mut self, sampled: Sampled, progress: &mut Progress<J::Output>) {
        let Backend::Worker(run) = &mut self.backend else {
            return;
        };
        run.sampling = false;
        if sampled.generation < run.generation {
            return;
        }
        progress.sampled = Some(WorkerSamples {
            step: run_step(self.step_base, sampled.steps_done),
            fields: sampled.fields,
            log_q: sampled.log_q,
        });
    }

    /// After a worker failed: the run goes on in the page from the last
    /// parameters heard. Returns what to tell the user.
    fn move_into_page(&mut self, why: &str) -> String {
        let Backend::Worker(run) = &mut self.backend else {
            return why.to_string();
        };
        // nothing more comes from it
        run.drawing = false;
        run.sampling = false;
        let (count, model) = run.latest.clone();
        let step = run_step(self.step_base, count);
        let mut settings = run.spec.settings.clone();
        settings.threads = default_threads();
        let dim = run.spec.target.dim();
        let fixed_centre = run.spec.fixed_centre;
        match CpuTrainer::<f32>::new(model, run.spec.target.clone(), settings) {
            Ok(mut trainer) => {
                if fixed_centre {
                    trainer.freeze(0..dim);
                }
                self.device = trainer.backend();
                self.backend = Backend::Cpu(Box::new(trainer));
                self.step_base = step as i64;
                format!(
                    "the training worker failed ({why}); the run goes on in the page from step {step}: press play"
                )
            }
            Err(e) => format!(
                "the training worker failed ({why}), and the page cannot train the run: {e}"
            ),
        }
    }
}
