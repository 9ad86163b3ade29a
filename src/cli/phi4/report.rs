//! The phi^4 command's JSON reports: a flow run with its corrected estimates
//! and their pulls against HMC, and an HMC run's observables.

use crate::flow::FlowKind;
use crate::mcmc::Estimate;
use crate::mcmc::hmc::HmcSettings;
use crate::phi4::design::Design;
use crate::phi4::observables::Phi4Observables;
use crate::phi4::reference::Phi4Reference;
use crate::run::model_file::model_to_json;
use crate::run::phi4::Phi4FlowRun;
use crate::run::report::finite_or_null;
use crate::target::phi4::Phi4;
use serde_json::{Value, json};

/// `(flow - reference) / combined error` of one observable.
fn pull(flow: &Estimate, reference: &Estimate) -> f64 {
    (flow.mean - reference.mean) / (flow.error.powi(2) + reference.error.powi(2)).sqrt()
}

/// The JSON report of a flow run on the lattice, with its pulls against HMC.
pub fn flow_report(
    model: &Phi4,
    design: &Design,
    run: &Phi4FlowRun,
    reference: Option<&Phi4Reference>,
) -> Value {
    let e = &run.estimates;
    let o = &run.outcome;
    let mut v = json!({
        "lattice": model.size,
        "couplings": couplings_json(model),
        "design": design.label(),
        "flow": match design.flow.kind { FlowKind::Lattice => "coupling", k => k.name() },
        "family": design.flow.family.name(),
        "z2": design.flow.z2,
        "stack": design.flow.stack,
        "layers": design.flow.layers,
        "width": design.flow.width,
        "depth": design.flow.depth,
        "n_params": o.model.as_flow().n_params(),
        "steps": o.steps,
        "seconds": o.seconds,
        "backend": o.backend,
        "final_loss": finite_or_null(o.final_loss),
        "loss_every": o.loss_every,
        "loss_history": o.losses.iter().map(|&l| finite_or_null(l)).collect::<Vec<_>>(),
        "samples": e.samples,
        "ess": finite_or_null(e.ess),
        "acceptance": finite_or_null(e.acceptance),
        "reverse_kl": finite_or_null(e.reverse_kl),
        "log_z": finite_or_null(e.log_z),
        "positive_fraction": e.positive_fraction,
        "imh": observables_json(&e.imh, model.size),
        "reweighted": observables_json(&e.reweighted, model.size),
        "flow_histogram": e.flow_histogram.iter().map(|(x, d)| json!([x, d])).collect::<Vec<_>>(),
        "model": model_to_json(&o.model),
    });
    if let Some(stopped) = &o.stopped {
        v["stopped"] = json!(stopped.to_string());
    }
    if let Some(r) = reference {
        let h = &r.observables;
        v["hmc"] = observables_json(h, model.size);
        v["hmc"]["acceptance"] = json!(r.stats.acceptance);
        v["pulls"] = json!({
            "imh": {
                "abs_m_per_v": finite_or_null(pull(&e.imh.abs_m, &h.abs_m)),
                "m2_per_v": finite_or_null(pull(&e.imh.m2, &h.m2)),
                "g0": finite_or_null(pull(&e.imh.two_point[0], &h.two_point[0])),
            },
            "reweighted": {
                "abs_m_per_v": finite_or_null(pull(&e.reweighted.abs_m, &h.abs_m)),
                "m2_per_v": finite_or_null(pull(&e.reweighted.m2, &h.m2)),
                "g0": finite_or_null(pull(&e.reweighted.two_point[0], &h.two_point[0])),
            },
        });
    }
    v
}

fn estimate_json(e: &Estimate) -> Value {
    json!({"mean": e.mean, "error": e.error, "tau_int": e.tau_int})
}

/// Observables as JSON: every estimate as {mean, error, tau_int}, the full
/// two-point function, its time-slice sums and the histogram of M/V.
pub fn observables_json(obs: &Phi4Observables, size: usize) -> Value {
    // the zero-momentum correlator over the second lattice direction:
    // C(t) = sum_{x1} G_c(x1, t)
    let time_slices: Vec<Value> = (0..size)
        .map(|t| {
            let sum: f64 = (0..size).map(|x1| obs.two_point[t * size + x1].mean).sum();
            json!(sum)
        })
        .collect();
    json!({
        "m_per_v": estimate_json(&obs.m),
        "abs_m_per_v": estimate_json(&obs.abs_m),
        "m2_per_v": estimate_json(&obs.m2),
        "susceptibility": estimate_json(&obs.chi),
        "two_point": obs.two_point.iter().map(estimate_json).collect::<Vec<_>>(),
        "time_slices": time_slices,
        "histogram": obs.histogram.iter().map(|(x, d)| json!([x, d])).collect::<Vec<_>>(),
    })
}

fn couplings_json(model: &Phi4) -> Value {
    let c = model.couplings;
    let hopping = c.to_hopping();
    json!({
        "m2": c.m2,
        "lambda": c.lambda,
        "kappa": hopping.map(|h| h.0),
        "lambda_h": hopping.map(|h| h.1),
    })
}

/// The JSON report of an HMC run.
pub fn report(model: &Phi4, settings: &HmcSettings, r: &Phi4Reference, seconds: f64) -> Value {
    let mut v = observables_json(&r.observables, model.size);
    v["lattice"] = json!(model.size);
    v["couplings"] = couplings_json(model);
    v["hmc"] = json!({
        "trajectories": settings.trajectories,
        "thermalize": settings.thermalize,
        "leapfrog": settings.leapfrog,
        "step": r.stats.step,
        "acceptance": r.stats.acceptance,
        "seed": settings.seed,
        "seconds": seconds,
    });
    v
}
