//! A whole training run as the CLI (and the tests) perform it: build, train for
//! a number of steps with progress reports, evaluate, and describe the result.

use super::metrics::{held_out_nll, reverse_metrics};
use super::{CpuTrainer, TrainError, TrainSettings, Trainer};
use crate::flow::{FlowConfig, FlowKind, FlowModel};
use crate::model_file::model_to_json;
use crate::rng::Rng;
use crate::target::{Target, TargetKind};
use serde_json::{Value, json};
use std::time::Instant;

/// Float precision of the CPU trainer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Precision {
    F32,
    F64,
}

/// Everything that defines a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub target: Target,
    pub flow: FlowConfig,
    pub steps: usize,
    pub settings: TrainSettings,
    pub precision: Precision,
    /// Fresh samples for the held-out metrics.
    pub eval_samples: usize,
}

/// What a run produced.
pub struct RunOutcome {
    pub model: FlowModel<f64>,
    pub steps: usize,
    pub seconds: f64,
    pub final_loss: f64,
    /// Loss every `loss_every` steps.
    pub losses: Vec<f64>,
    pub loss_every: usize,
    pub stopped: Option<TrainError>,
    pub backend: String,
}

/// The initial model of a run (seeded by the run's seed).
pub fn initial_model(config: &RunConfig) -> Result<FlowModel<f64>, String> {
    let mut rng = Rng::seeded(config.settings.seed);
    config.flow.build(config.target.dim(), &mut rng)
}

/// Trains on the CPU; `progress(step, loss)` is called after every step.
pub fn train(
    config: &RunConfig,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<RunOutcome, String> {
    train_with(config, cpu_trainer(config)?, progress)
}

/// The CPU trainer of a run, in its precision.
pub fn cpu_trainer(config: &RunConfig) -> Result<Box<dyn Trainer>, String> {
    let model = initial_model(config)?;
    // The Z2-equivariant radial flow keeps its centre at the origin.
    let frozen = if config.flow.fixed_centre() {
        0..config.target.dim()
    } else {
        0..0
    };
    Ok(match config.precision {
        Precision::F32 => {
            let mut t =
                CpuTrainer::<f32>::new(model, config.target.clone(), config.settings.clone())?;
            t.freeze(frozen);
            Box::new(t)
        }
        Precision::F64 => {
            let mut t =
                CpuTrainer::<f64>::new(model, config.target.clone(), config.settings.clone())?;
            t.freeze(frozen);
            Box::new(t)
        }
    })
}

/// Where a run trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    /// the CPU trainer, in the run's precision
    Cpu,
    /// WGSL kernels through wgpu, in float32
    Gpu,
}

impl Backend {
    /// `cpu` or `gpu`, as the CLI spells them.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            other => Err(format!("--backend must be cpu or gpu, got '{other}'")),
        }
    }
}

/// The trainer of a run on `backend`.
pub fn trainer(config: &RunConfig, backend: Backend) -> Result<Box<dyn Trainer>, String> {
    match backend {
        Backend::Cpu => cpu_trainer(config),
        Backend::Gpu => gpu_trainer(config),
    }
}

/// The GPU trainer of a run (radial, coupling and lattice flows).
#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
pub fn gpu_trainer(config: &RunConfig) -> Result<Box<dyn Trainer>, String> {
    if config.flow.fixed_centre() {
        return Err(
            "the Z2 radial flow keeps its centre fixed, which only the CPU trainer does; use --backend cpu"
                .into(),
        );
    }
    let model = initial_model(config)?;
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    let trainer =
        crate::gpu::GpuTrainer::new(ctx, model, config.target.clone(), config.settings.clone())?;
    Ok(Box::new(trainer))
}

/// The GPU trainer of a run: none in this build.
#[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
pub fn gpu_trainer(_config: &RunConfig) -> Result<Box<dyn Trainer>, String> {
    Err("this build has no GPU backend for the command line (built without the 'gpu' feature); use --backend cpu".into())
}

/// Trains with the given trainer (any backend).
pub fn train_with(
    config: &RunConfig,
    mut trainer: Box<dyn Trainer>,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<RunOutcome, String> {
    let loss_every = (config.steps / 500).max(1);
    let mut losses = Vec::new();
    let mut final_loss = f64::NAN;
    let mut stopped = None;
    let start = Instant::now();
    for step in 1..=config.steps {
        match trainer.step() {
            Ok(loss) => {
                final_loss = loss;
                if step % loss_every == 0 {
                    losses.push(loss);
                }
                progress(step, loss);
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    Ok(RunOutcome {
        model: trainer.model(),
        steps: trainer.steps_done(),
        seconds: start.elapsed().as_secs_f64(),
        final_loss,
        losses,
        loss_every,
        stopped,
        backend: trainer.backend(),
    })
}

/// The JSON report of a run, with held-out metrics.
pub fn report(config: &RunConfig, outcome: &RunOutcome) -> Value {
    let flow = outcome.model.as_flow();
    let mut rng = Rng::seeded(config.settings.seed.wrapping_add(0x005e_ed0f_7e57));
    let mut r = json!({
        "target": config.target.name(),
        "flow": config.flow.kind.name(),
        "family": config.flow.family.name(),
        "stack": config.flow.stack,
        "loss": config.settings.loss.name(),
        "batch": config.settings.batch,
        "learning_rate": config.settings.learning_rate,
        "seed": config.settings.seed,
        "backend": outcome.backend,
        "steps": outcome.steps,
        "seconds": outcome.seconds,
        "steps_per_second": outcome.steps as f64 / outcome.seconds.max(1e-9),
        "final_loss": finite_or_null(outcome.final_loss),
        "n_params": flow.n_params(),
        "loss_every": outcome.loss_every,
        "loss_history": outcome.losses.iter().map(|&v| finite_or_null(v)).collect::<Vec<_>>(),
    });
    if matches!(config.flow.kind, FlowKind::Coupling | FlowKind::Lattice) {
        r["layers"] = json!(config.flow.layers);
        r["width"] = json!(config.flow.width);
        r["depth"] = json!(config.flow.depth);
    }
    if config.flow.z2 {
        r["z2"] = json!(true);
    }
    if let Some(e) = &outcome.stopped {
        r["stopped"] = json!(e.to_string());
    }
    match config.target.kind() {
        TargetKind::Samples => {
            let nll = held_out_nll(flow, &config.target, config.eval_samples, &mut rng);
            r["test_nll"] = json!(nll.map(finite_or_null));
            r["eval_samples"] = json!(config.eval_samples);
        }
        TargetKind::Energy => {
            if let Some(m) = reverse_metrics(flow, &config.target, config.eval_samples, &mut rng) {
                r["reverse_kl"] = finite_or_null(m.reverse_kl);
                r["log_z"] = finite_or_null(m.log_z);
                r["log_z_known"] = json!(m.log_z_known);
                r["ess"] = finite_or_null(m.ess);
                r["acceptance"] = finite_or_null(m.acceptance);
                r["eval_samples"] = json!(config.eval_samples);
            }
        }
    }
    r["model"] = model_to_json(&outcome.model);
    r
}

fn finite_or_null(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}
