//! The worker's side: a CPU trainer driven by [`ToWorker`] messages, training
//! in short stretches so the messages that come meanwhile (a new learning
//! rate, a hand edit, "stop here") are heard between them. The same code
//! runs in a browser's Web Worker and in a native thread.
//!
//! A worker may have helpers, further workers running this same code. Then
//! each step is split: the lead draws the batch, sends every helper its share
//! of the batch's parts with the parameters of the moment, computes its own
//! share, and when the helpers' answers are in sums all parts in their order
//! and takes Adam's step. The sum is the one a lone worker makes, so a split
//! run gives the same numbers as an unsplit one, bit for bit.

use super::protocol::{
    DrawJob, Drawn, DrawnViews, FromWorker, PartsDone, PartsJob, Sampled, ToWorker, Trained,
    WorkerSpec,
};
use crate::app::host::schedule::checkpoint_due;
use crate::app::host::stop_reason;
use crate::app::playground::picture::cpu_picture_from;
use crate::phi4::estimates::flow_samples_from;
use crate::target::Target;
use crate::train::metrics::model_measures;
use crate::train::{CpuTrainer, TrainError, Trainer};
use std::collections::VecDeque;
use web_time::{Duration, Instant};

/// The parameters go back to the page at least this often while training
/// (the views draw the model they hold).
pub const PARAMS_EVERY: Duration = Duration::from_millis(100);

/// A helper worker as its lead sees it: where its shares of the steps go.
/// Its answers come back to the lead as [`ToWorker::PartsDone`] (or
/// [`ToWorker::HelperFailed`]) through the lead's own messages.
pub trait Helper {
    /// Sends a message; why not, when it cannot be sent.
    fn post(&self, message: &ToWorker) -> Result<(), String>;
}

/// A split step whose helpers have not all answered.
struct InFlight {
    /// the step's number among split steps (answers name it)
    step: u64,
    /// each part's loss sum, as it comes in
    losses: Vec<f64>,
    /// helpers yet to answer
    waiting: usize,
}

/// Steps taken since the last reply to the page.
struct Stretch {
    start: Instant,
    losses: Vec<f64>,
    error: Option<String>,
    checkpoint: bool,
}

impl Stretch {
    /// A stretch starting now.
    fn new() -> Self {
        Self {
            start: Instant::now(),
            losses: Vec::new(),
            error: None,
            checkpoint: false,
        }
    }
}

/// A trainer and what the page last asked of it.
#[derive(Default)]
pub struct WorkerCore {
    trainer: Option<CpuTrainer<f32>>,
    /// train until the trainer's own count reaches this
    until: usize,
    /// the run's step when the trainer's count was 0
    base: i64,
    /// the parameters' generation (each replacement by the page is one)
    generation: u64,
    /// when the parameters last went back, and at which of the trainer's steps
    params_sent: Option<Instant>,
    params_sent_at: Option<usize>,
    /// the longest stretch between replies ([`Self::work`]'s budget)
    budget: Duration,
    /// the workers this one splits its steps with
    helpers: Vec<Box<dyn Helper>>,
    /// split steps begun so far
    split_steps: u64,
    in_flight: Option<InFlight>,
    /// the page's messages that came while a split step was in flight: a
    /// lone worker hears them between steps, and so does a split one
    deferred: VecDeque<ToWorker>,
    stretch: Option<Stretch>,
    /// replies not yet taken by [`Self::take_replies`]
    outbox: Vec<FromWorker>,
    /// the run's target (the reverse KL's measure needs it)
    target: Option<Target>,
}

impl WorkerCore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The workers to split steps with, for the run a [`ToWorker::Start`]
    /// about to be handled starts (the glue starts them: threads natively,
    /// Web Workers in a browser; where they cannot be started, it gives
    /// none and the worker trains alone, as its answer to the start says).
    pub fn set_helpers(&mut self, helpers: Vec<Box<dyn Helper>>) {
        self.helpers = helpers;
    }

    /// The replies since the last call, in order.
    pub fn take_replies(&mut self) -> Vec<FromWorker> {
        std::mem::take(&mut self.outbox)
    }

    /// Whether a split step waits for helpers (their answers are the only
    /// messages that move it on).
    pub fn awaiting_helpers(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Takes in one message; replies go to the outbox.
    pub fn handle(&mut self, message: ToWorker) {
        if self.in_flight.is_some()
            && !matches!(message, ToWorker::PartsDone(_) | ToWorker::HelperFailed(_))
        {
            self.deferred.push_back(message);
            return;
        }
        let from_the_page = !matches!(
            message,
            ToWorker::Parts(_) | ToWorker::PartsDone(_) | ToWorker::HelperFailed(_)
        );
        if from_the_page {
            // the steps so far go out under the state they were taken in, as
            // a lone worker's do (its stretch always ends before it hears)
            self.reply_with_stretch();
        }
        match message {
            ToWorker::Start(spec) => self.start(&spec),
            ToWorker::Train { until, base } => {
                self.until = until;
                self.base = base;
                self.reply_at_a_halt();
            }
            ToWorker::SetLearningRate(lr) => {
                if let Some(t) = &mut self.trainer {
                    t.set_learning_rate(lr);
                }
            }
            ToWorker::SetModel { generation, params } => self.set_model(generation, params),
            ToWorker::Parts(job) => {
                let answer = self.compute_share(job);
                self.outbox.push(answer);
            }
            ToWorker::PartsDone(done) => self.take_share(done),
            ToWorker::HelperFailed(why) => self.helper_failed(&why),
            ToWorker::Draw(job) => self.draw(job),
            ToWorker::Sample { latent } => self.sample(&latent),
        }
    }

    /// A limit at or below the steps taken (the page paused while steps were
    /// in flight): the parameters the worker stops at go back, so the page's
    /// views and model catch up with its count.
    fn reply_at_a_halt(&mut self) {
        let Some(trainer) = self.trainer.as_ref() else {
            return;
        };
        let done = trainer.steps_done();
        if self.until > done || self.params_sent_at == Some(done) {
            return;
        }
        self.params_sent = Some(Instant::now());
        self.params_sent_at = Some(done);
        self.outbox.push(FromWorker::Trained(Trained {
            steps_done: done,
            generation: self.generation,
            params: Some(trainer.model().as_flow().params().to_vec()),
            ..Trained::default()
        }));
    }

    /// Pushes a measurement's latent fields through the flow as it stands
    /// (in float64, as the page would); before the trainer is built, nothing.
    fn sample(&mut self, latent: &[f64]) {
        let Some(trainer) = self.trainer.as_ref() else {
            return;
        };
        let model = trainer.model();
        let (fields, log_q) = flow_samples_from(model.as_flow(), latent);
        self.outbox.push(FromWorker::Sampled(Sampled {
            steps_done: trainer.steps_done(),
            generation: self.generation,
            fields,
            log_q,
        }));
    }

    /// Draws the views of the parameters as they stand, or of the job's cut
    /// (the page then only shows them); before the trainer is built, nothing
    /// (the page hears that the worker failed instead).
    fn draw(&mut self, job: DrawJob) {
        let Some(trainer) = self.trainer.as_ref() else {
            return;
        };
        let started = Instant::now();
        let cut_maps = job.cut.as_ref().map(|c| c.maps);
        // a cut of the page's parameters (one that does not fit the run
        // draws nothing: an empty picture, so the page is not left waiting)
        let (model, params) = match job.cut {
            None => {
                let model = trainer.model();
                let params = model.as_flow().params().to_vec();
                (Some(model), params)
            }
            Some(cut) => {
                let own = trainer.model();
                match own.with_params(cut.params.clone()) {
                    Ok(whole) => (whole.prefix(cut.maps), cut.params),
                    // (the parameters that come back must fit the run)
                    Err(_) => (None, own.as_flow().params().to_vec()),
                }
            }
        };
        // whole (x, y) points only
        let latent = &job.latent[..job.latent.len() / 2 * 2];
        let measures = job.measure.zip(model.as_ref()).map(|(m, model)| {
            let step = (m.base + trainer.steps_done() as i64).max(0) as usize;
            let reverse = (m.reverse_samples > 0)
                .then_some(self.target.as_ref())
                .flatten();
            model_measures(
                model.as_flow(),
                &m.held_out,
                reverse,
                m.reverse_samples,
                step,
            )
        });
        let views = model.map_or_else(DrawnViews::default, |model| {
            DrawnViews::from_picture(cpu_picture_from(model, 0, latent, job.n))
        });
        self.outbox.push(FromWorker::Drawn(Box::new(Drawn {
            steps_done: trainer.steps_done(),
            generation: self.generation,
            params,
            views,
            measures,
            cut: cut_maps,
            seconds: started.elapsed().as_secs_f64(),
        })));
    }

    fn start(&mut self, spec: &WorkerSpec) {
        let built = spec.to_host().and_then(|host| {
            self.target = Some(host.target.clone());
            let dim = host.target.dim();
            let mut trainer = CpuTrainer::<f32>::new(host.model, host.target, host.settings)
                .map_err(|e| e.to_string())?;
            if host.fixed_centre {
                trainer.freeze(0..dim);
            }
            Ok(trainer)
        });
        match built {
            Ok(trainer) => {
                let params = trainer.model().as_flow().params().to_vec();
                self.trainer = Some(trainer);
                self.params_sent = Some(Instant::now());
                self.params_sent_at = Some(0);
                // each helper builds the same trainer (and no helpers of its own)
                let for_helpers = ToWorker::Start(WorkerSpec {
                    helpers: 0,
                    ..spec.clone()
                });
                let sent: Result<(), String> =
                    self.helpers.iter().try_for_each(|h| h.post(&for_helpers));
                if let Err(why) = sent {
                    self.helper_failed(&why);
                    return;
                }
                self.outbox.push(FromWorker::Trained(Trained {
                    params: Some(params),
                    helpers: Some(self.helpers.len()),
                    ..Trained::default()
                }));
            }
            Err(why) => self.outbox.push(FromWorker::Failed(format!(
                "the trainer could not be built: {why}"
            ))),
        }
    }

    fn set_model(&mut self, generation: u64, params: Vec<f64>) {
        let Some(trainer) = self.trainer.as_mut() else {
            return;
        };
        self.generation = generation;
        // whatever the page asked before the edit, it asks again
        self.until = trainer.steps_done();
        // (the page holds the parameters it set)
        self.params_sent_at = Some(trainer.steps_done());
        let replaced = trainer
            .model()
            .with_params(params)
            .map_err(|e| e.to_string())
            .and_then(|m| trainer.set_model(&m).map_err(|e| e.to_string()));
        self.outbox.push(FromWorker::Trained(Trained {
            steps_done: trainer.steps_done(),
            generation,
            error: replaced
                .err()
                .map(|e| format!("the parameters could not be set: {e}")),
            ..Trained::default()
        }));
    }

    /// Whether there are steps to take now.
    pub fn has_work(&self) -> bool {
        self.in_flight.is_none()
            && self
                .trainer
                .as_ref()
                .is_some_and(|t| t.steps_done() < self.until)
    }

    /// Trains for about `budget`, stopping early at a checkpoint step, at the
    /// page's limit or at a failed step, and replies with the steps taken.
    /// With helpers it begins one split step and returns: the step ends
    /// when their answers come ([`Self::handle`]).
    pub fn work(&mut self, budget: Duration) {
        self.budget = budget;
        while self.has_work() {
            if !self.helpers.is_empty() {
                self.begin_split_step();
                return;
            }
            let Some(trainer) = self.trainer.as_mut() else {
                return;
            };
            let result = trainer.step();
            self.record(result);
            if self.stretch.is_none() {
                // a reply went out: back to the messages
                return;
            }
        }
    }

    /// A step taken: its loss (or why it failed) joins the stretch, which
    /// goes to the page when it is due.
    fn record(&mut self, result: Result<f64, TrainError>) {
        let Some(trainer) = self.trainer.as_ref() else {
            return;
        };
        let stretch = self.stretch.get_or_insert_with(Stretch::new);
        match result {
            Ok(loss) => stretch.losses.push(loss),
            Err(e) => {
                stretch.error = Some(stop_reason(&e));
                // the page decides how to go on
                self.until = trainer.steps_done();
            }
        }
        let step = (self.base + trainer.steps_done() as i64).max(0) as usize;
        stretch.checkpoint |= checkpoint_due(step);
        let due = stretch.checkpoint
            || stretch.error.is_some()
            || trainer.steps_done() >= self.until
            || stretch.start.elapsed() >= self.budget;
        if due {
            self.reply_with_stretch();
        }
    }

    fn reply_with_stretch(&mut self) {
        let (Some(trainer), Some(stretch)) = (self.trainer.as_ref(), self.stretch.take()) else {
            return;
        };
        let now = Instant::now();
        let stale = self
            .params_sent
            .is_none_or(|at| now.duration_since(at) >= PARAMS_EVERY);
        let with_params = stretch.checkpoint
            || stale
            || stretch.error.is_some()
            || trainer.steps_done() >= self.until;
        let params = with_params.then(|| {
            self.params_sent = Some(now);
            self.params_sent_at = Some(trainer.steps_done());
            trainer.model().as_flow().params().to_vec()
        });
        self.outbox.push(FromWorker::Trained(Trained {
            losses: stretch.losses,
            steps_done: trainer.steps_done(),
            generation: self.generation,
            params,
            error: stretch.error,
            seconds: stretch.start.elapsed().as_secs_f64(),
            helpers: None,
        }));
    }

    /// Draws the batch, sends the helpers their shares and computes the
    /// lead's own (the first parts).
    fn begin_split_step(&mut self) {
        let Some(trainer) = self.trainer.as_mut() else {
            return;
        };
        // the stretch's time counts from the first split step's start
        self.stretch.get_or_insert_with(Stretch::new);
        let batch = trainer.draw_batch();
        let parts = trainer.part_count(&batch);
        let workers = self.helpers.len() + 1;
        let share = |w: usize| w * parts / workers..(w + 1) * parts / workers;
        self.split_steps += 1;
        let step = self.split_steps;
        let mut waiting = 0;
        let mut sent = Ok(());
        for (k, helper) in self.helpers.iter().enumerate() {
            let parts = share(k + 1);
            if parts.is_empty() {
                continue;
            }
            let job = ToWorker::Parts(PartsJob {
                step,
                parts,
                params: trainer.params_t().to_vec(),
                batch: batch.clone(),
            });
            sent = sent.and_then(|()| helper.post(&job));
            waiting += 1;
        }
        let own = share(0);
        let mut losses = vec![f64::NAN; parts];
        let computed = trainer.compute_parts(&batch, own.clone());
        losses[own].copy_from_slice(&computed);
        if let Err(why) = sent {
            self.helper_failed(&why);
            return;
        }
        self.in_flight = Some(InFlight {
            step,
            losses,
            waiting,
        });
        if waiting == 0 {
            self.finish_split_step();
        }
    }

    /// A helper's side: the parts it was given, on the lead's parameters.
    fn compute_share(&mut self, job: PartsJob) -> FromWorker {
        let Some(trainer) = self.trainer.as_mut() else {
            return FromWorker::Failed("a share of a step came before the trainer".into());
        };
        if !trainer.set_params_t(&job.params) {
            return FromWorker::Failed("a share of a step with other parameters".into());
        }
        let losses = trainer.compute_parts(&job.batch, job.parts.clone());
        let mut grads = Vec::with_capacity(losses.len() * job.params.len());
        for part in job.parts.start..job.parts.start + losses.len() {
            grads.extend_from_slice(trainer.part_grad(part));
        }
        FromWorker::PartsDone(PartsDone {
            step: job.step,
            first: job.parts.start,
            losses,
            grads,
        })
    }

    /// The lead's side: a helper's answer joins the step in flight.
    fn take_share(&mut self, done: PartsDone) {
        let (Some(trainer), Some(flight)) = (self.trainer.as_mut(), self.in_flight.as_mut()) else {
            return;
        };
        if done.step != flight.step {
            return; // an answer about a step given up
        }
        let n = trainer.params_t().len();
        let fits = done.grads.len() == done.losses.len() * n
            && done.first + done.losses.len() <= flight.losses.len();
        if !fits {
            self.helper_failed("a helper's answer does not fit the step");
            return;
        }
        for (k, &loss) in done.losses.iter().enumerate() {
            flight.losses[done.first + k] = loss;
            trainer.set_part_grad(done.first + k, &done.grads[k * n..(k + 1) * n]);
        }
        flight.waiting = flight.waiting.saturating_sub(1);
        if flight.waiting == 0 {
            self.finish_split_step();
        }
    }

    /// Every share is in: the step is summed and taken, and the messages
    /// that waited for it are heard.
    fn finish_split_step(&mut self) {
        let (Some(trainer), Some(flight)) = (self.trainer.as_mut(), self.in_flight.take()) else {
            return;
        };
        let result = trainer.finish_step(&flight.losses);
        self.record(result);
        while self.in_flight.is_none()
            && let Some(message) = self.deferred.pop_front()
        {
            self.handle(message);
        }
    }

    /// A helper broke or cannot be reached: the worker says so (the page
    /// goes on without it) and gives up the step in flight.
    fn helper_failed(&mut self, why: &str) {
        self.helpers.clear();
        self.in_flight = None;
        self.deferred.clear();
        self.outbox
            .push(FromWorker::Failed(format!("a helper worker broke: {why}")));
    }
}
