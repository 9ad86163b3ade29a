//! The JSON report of a finished run: its settings, speed, loss history,
//! held-out metrics and the trained model.

use super::model_file::model_to_json;
use crate::flow::FlowKind;
use crate::rng::Rng;
use crate::target::TargetKind;
use crate::train::config::{RunConfig, RunOutcome};
use crate::train::metrics::{held_out_nll, reverse_metrics};
use serde_json::{Value, json};

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

/// A number for JSON, or `null` where it is not finite (JSON has no NaN).
pub fn finite_or_null(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}
