//! Where a phi^4 lab run trains: the CPU trainer, a step at a time inside the
//! frame, or the GPU's lattice kernels, whose steps and measurement samples
//! come back from an asynchronous task (a browser maps GPU buffers between
//! frames, so nothing waits for the GPU inside a frame).

use crate::gpu::{GpuContext, GpuTrainer};
use crate::train::metrics::log_normal;
use crate::train::run::{RunConfig, cpu_trainer, initial_model};
use crate::train::{TrainError, Trainer};
use std::cell::RefCell;
use std::rc::Rc;
use web_time::Instant;

/// Flow samples drawn on the GPU after some steps: fields (n x V) and log q.
pub struct GpuSamples {
    pub step: usize,
    pub fields: Vec<f64>,
    pub log_q: Vec<f64>,
}

/// What a GPU task handed back.
#[derive(Default)]
pub struct Returned {
    /// (step, batch loss) of each step it took
    pub losses: Vec<(usize, f64)>,
    pub samples: Option<GpuSamples>,
    /// why it stopped (the trainer kept the state before the failed steps)
    pub error: Option<String>,
    /// seconds its steps took
    pub seconds: f64,
}

/// The GPU trainer's home between tasks, and what the last task returned.
#[derive(Default)]
pub struct Inbox {
    /// the trainer, when no task holds it
    trainer: Option<GpuTrainer>,
    returned: Option<Returned>,
    steps_done: usize,
    /// a learning rate to set when the trainer is next home
    pending_lr: Option<f64>,
}

/// A lab run's trainer.
pub enum LabTrainer {
    Cpu(Box<dyn Trainer>),
    Gpu(Rc<RefCell<Inbox>>),
}

impl LabTrainer {
    /// On `gpu` where given and it can train this flow, else on the CPU; with
    /// a description of where for the user.
    pub fn new(config: &RunConfig, gpu: Option<&GpuContext>) -> Result<(Self, String), String> {
        let refused = match gpu.filter(|ctx| ctx.lost().is_none()) {
            Some(ctx) => {
                let built = initial_model(config).and_then(|model| {
                    GpuTrainer::new(
                        ctx.clone(),
                        model,
                        config.target.clone(),
                        config.settings.clone(),
                    )
                });
                match built {
                    Ok(trainer) => {
                        let device = trainer.backend();
                        let inbox = Inbox {
                            trainer: Some(trainer),
                            ..Inbox::default()
                        };
                        return Ok((Self::Gpu(Rc::new(RefCell::new(inbox))), device));
                    }
                    Err(e) => Some(e),
                }
            }
            None => None,
        };
        let trainer = cpu_trainer(config)?;
        let device = match refused {
            Some(why) => format!("{} (the GPU cannot: {why})", trainer.backend()),
            None => trainer.backend(),
        };
        Ok((Self::Cpu(trainer), device))
    }

    pub fn on_gpu(&self) -> bool {
        matches!(self, Self::Gpu(_))
    }

    pub fn steps_done(&self) -> usize {
        match self {
            Self::Cpu(t) => t.steps_done(),
            Self::Gpu(inbox) => inbox.borrow().steps_done,
        }
    }

    /// The learning rate of the following steps (on the GPU from its next task).
    pub fn set_learning_rate(&mut self, lr: f64) {
        match self {
            Self::Cpu(t) => t.set_learning_rate(lr),
            Self::Gpu(inbox) => inbox.borrow_mut().pending_lr = Some(lr),
        }
    }

    /// Whether a GPU task holds the trainer now.
    pub fn busy(&self) -> bool {
        match self {
            Self::Cpu(_) => false,
            Self::Gpu(inbox) => inbox.borrow().trainer.is_none(),
        }
    }

    /// What the last GPU task handed back, once (nothing on the CPU).
    pub fn collect(&mut self) -> Option<Returned> {
        match self {
            Self::Cpu(_) => None,
            Self::Gpu(inbox) => inbox.borrow_mut().returned.take(),
        }
    }

    /// Hands the GPU trainer to a task for `steps` steps and then, with
    /// `latent` (n x V standard normals), flow samples from it. Does nothing
    /// on the CPU or while a task holds the trainer.
    pub fn launch(&mut self, steps: usize, latent: Option<Vec<f32>>) {
        let Self::Gpu(inbox) = self else { return };
        let (trainer, lr) = {
            let mut b = inbox.borrow_mut();
            (b.trainer.take(), b.pending_lr.take())
        };
        let Some(mut trainer) = trainer else { return };
        if let Some(lr) = lr {
            trainer.set_learning_rate(lr);
        }
        let inbox = Rc::clone(inbox);
        super::session::spawn(async move {
            let mut returned = Returned::default();
            let first = trainer.steps_done() + 1;
            let start = Instant::now();
            match trainer.steps_async(steps).await {
                Ok(losses) => {
                    returned.losses = (first..).zip(losses).collect();
                }
                Err(e) => returned.error = Some(stop_reason(e)),
            }
            returned.seconds = start.elapsed().as_secs_f64();
            if let Some(z) = latent.filter(|_| returned.error.is_none()) {
                match trainer.x_from_z_async(&z).await {
                    Ok(pushed) => {
                        returned.samples = Some(samples(trainer.steps_done(), &z, &pushed))
                    }
                    Err(e) => returned.error = Some(format!("the GPU failed while sampling: {e}")),
                }
            }
            let mut b = inbox.borrow_mut();
            b.steps_done = trainer.steps_done();
            b.returned = Some(returned);
            b.trainer = Some(trainer);
        });
    }
}

/// Why training stopped a run, for the user.
pub fn stop_reason(e: TrainError) -> String {
    match e {
        TrainError::NonFinite { step } => {
            format!("diverged at step {step} (NaN); the last good state is kept")
        }
        other => other.to_string(),
    }
}

/// Fields and log q from latent fields `z` (n x V) and the pushed rows
/// (x, log det: n x (V + 1)).
fn samples(step: usize, z: &[f32], pushed: &[f32]) -> GpuSamples {
    // n x (V + 1) values against n x V: the difference is n
    let n = pushed.len().saturating_sub(z.len()).max(1);
    let v = z.len() / n;
    let mut fields = Vec::with_capacity(n * v);
    let mut log_q = Vec::with_capacity(n);
    for (zi, row) in z.chunks(v).zip(pushed.chunks(v + 1)) {
        fields.extend(row[..v].iter().map(|&x| x as f64));
        let z64: Vec<f64> = zi.iter().map(|&x| x as f64).collect();
        log_q.push(log_normal(&z64) - row[v] as f64);
    }
    GpuSamples {
        step,
        fields,
        log_q,
    }
}
