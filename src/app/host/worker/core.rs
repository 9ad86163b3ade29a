//! The worker's side: a CPU trainer driven by [`ToWorker`] messages, training
//! in short stretches so the messages that come meanwhile (a new learning
//! rate, a hand edit, "stop here") are heard between them. The same code
//! runs in a browser's Web Worker and in a native thread.

use super::protocol::{FromWorker, ToWorker, Trained};
use crate::app::host::schedule::checkpoint_due;
use crate::app::host::stop_reason;
use crate::train::{CpuTrainer, Trainer};
use web_time::{Duration, Instant};

/// The parameters go back to the page at least this often while training
/// (the views draw the model they hold).
pub const PARAMS_EVERY: Duration = Duration::from_millis(100);

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
    /// when the parameters last went back
    params_sent: Option<Instant>,
}

impl WorkerCore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in one message; returns the reply to send at once, if any.
    pub fn handle(&mut self, message: ToWorker) -> Option<FromWorker> {
        match message {
            ToWorker::Start(spec) => Some(self.start(&spec)),
            ToWorker::Train { until, base } => {
                self.until = until;
                self.base = base;
                None
            }
            ToWorker::SetLearningRate(lr) => {
                if let Some(t) = &mut self.trainer {
                    t.set_learning_rate(lr);
                }
                None
            }
            ToWorker::SetModel { generation, params } => {
                let trainer = self.trainer.as_mut()?;
                self.generation = generation;
                // whatever the page asked before the edit, it asks again
                self.until = trainer.steps_done();
                let replaced = trainer
                    .model()
                    .with_params(params)
                    .map_err(|e| e.to_string())
                    .and_then(|m| trainer.set_model(&m).map_err(|e| e.to_string()));
                Some(FromWorker::Trained(Trained {
                    steps_done: trainer.steps_done(),
                    generation,
                    error: replaced
                        .err()
                        .map(|e| format!("the parameters could not be set: {e}")),
                    ..Trained::default()
                }))
            }
        }
    }

    fn start(&mut self, spec: &super::protocol::WorkerSpec) -> FromWorker {
        let built = spec.to_host().and_then(|host| {
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
                FromWorker::Trained(Trained {
                    params: Some(params),
                    ..Trained::default()
                })
            }
            Err(why) => FromWorker::Failed(format!("the trainer could not be built: {why}")),
        }
    }

    /// Whether there are steps to take.
    pub fn has_work(&self) -> bool {
        self.trainer
            .as_ref()
            .is_some_and(|t| t.steps_done() < self.until)
    }

    /// Trains for about `budget`, stopping early at a checkpoint step, at the
    /// page's limit or at a failed step; the reply, when steps were taken.
    pub fn work(&mut self, budget: Duration) -> Option<FromWorker> {
        if !self.has_work() {
            return None;
        }
        let trainer = self.trainer.as_mut()?;
        let start = Instant::now();
        let mut losses = Vec::new();
        let mut error = None;
        let mut checkpoint = false;
        while trainer.steps_done() < self.until && start.elapsed() < budget {
            match trainer.step() {
                Ok(loss) => losses.push(loss),
                Err(e) => {
                    error = Some(stop_reason(&e));
                    // the page decides how to go on
                    self.until = trainer.steps_done();
                    break;
                }
            }
            let step = (self.base + trainer.steps_done() as i64).max(0) as usize;
            if checkpoint_due(step) {
                checkpoint = true;
                break;
            }
        }
        let now = Instant::now();
        let stale = self
            .params_sent
            .is_none_or(|at| now.duration_since(at) >= PARAMS_EVERY);
        let with_params =
            checkpoint || stale || error.is_some() || trainer.steps_done() >= self.until;
        let params = with_params.then(|| {
            self.params_sent = Some(now);
            trainer.model().as_flow().params().to_vec()
        });
        Some(FromWorker::Trained(Trained {
            losses,
            steps_done: trainer.steps_done(),
            generation: self.generation,
            params,
            error,
            seconds: start.elapsed().as_secs_f64(),
        }))
    }
}
