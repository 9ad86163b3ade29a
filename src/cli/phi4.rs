//! `flowplay phi4 hmc`: the phi^4 reference from Hamiltonian Monte Carlo.

use super::Args;
use crate::mcmc::Estimate;
use crate::mcmc::hmc::HmcSettings;
use crate::mcmc::phi4_run::{Phi4Reference, reference};
use crate::target::phi4::{Couplings, Phi4};
use serde_json::{Value, json};
use std::time::Instant;

pub const HELP: &str = "\
flowplay phi4 hmc --lattice 8 (--m2 -4 --lambda 8 | --kappa K --lambda-h L)
                  [--trajectories 10000] [--thermalize 1000] [--leapfrog 10]
                  [--step 0.1] [--seed 0] [--out hmc.json]

phi^4 on an L x L periodic lattice (math.md section 6), sampled by Hamiltonian
Monte Carlo (leapfrog, Metropolis-corrected; the step size adapts towards 80%
acceptance while thermalizing). Couplings in the standard convention (--m2,
--lambda) or the hopping one (--kappa, --lambda-h); both are reported.
Prints <|M|>/V, <M^2>/V, the susceptibility and the connected two-point
function's time-slice sum, each with its error (from the integrated
autocorrelation time, also reported). --out writes the JSON report: every
estimate as {mean, error, tau_int}, the full two-point function G_c(x) over the
L x L displacements, and the histogram of M/V.";

pub fn run(argv: &[String]) -> Result<(), String> {
    let Some((sub, rest)) = argv.split_first() else {
        return Err(format!("which phi4 command? ({HELP})"));
    };
    match sub.as_str() {
        "hmc" => hmc(rest),
        other => Err(format!(
            "unknown phi4 command '{other}' (expected hmc; see flowplay help phi4)"
        )),
    }
}

/// The couplings from either convention.
fn couplings(args: &Args) -> Result<Couplings, String> {
    let standard = args.str("m2").is_some() || args.str("lambda").is_some();
    let hopping = args.str("kappa").is_some() || args.str("lambda-h").is_some();
    match (standard, hopping) {
        (true, true) => {
            Err("give the couplings in one convention: --m2/--lambda or --kappa/--lambda-h".into())
        }
        (false, true) => {
            Couplings::from_hopping(args.get("kappa", f64::NAN)?, args.get("lambda-h", 0.0)?)
        }
        _ => Ok(Couplings {
            m2: args.get("m2", -4.0)?,
            lambda: args.get("lambda", 8.0)?,
        }),
    }
}

fn hmc(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(
        argv,
        &[
            "lattice",
            "m2",
            "lambda",
            "kappa",
            "lambda-h",
            "trajectories",
            "thermalize",
            "leapfrog",
            "step",
            "seed",
            "out",
        ],
        &[],
    )?;
    let size: usize = args.get("lattice", 8)?;
    let model = Phi4::new(size, couplings(&args)?)?;
    let defaults = HmcSettings::default();
    let settings = HmcSettings {
        trajectories: args.get("trajectories", defaults.trajectories)?,
        thermalize: args.get("thermalize", defaults.thermalize)?,
        leapfrog: args.get("leapfrog", defaults.leapfrog)?,
        step: args.get("step", defaults.step)?,
        seed: args.get("seed", defaults.seed)?,
    };
    if settings.trajectories < 2 {
        return Err("--trajectories must be at least 2".into());
    }
    let start = Instant::now();
    let r = reference(&model, &settings, |done, total| {
        eprintln!(
            "hmc: {done}/{total} trajectories ({:.1} s)",
            start.elapsed().as_secs_f64()
        );
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let c = model.couplings;
    let show = |e: &Estimate| format!("{:.5} +- {:.5} (tau_int {:.1})", e.mean, e.error, e.tau_int);
    println!(
        "phi4 L={size} m2={} lambda={}: acceptance {:.3}, step {:.4}, {seconds:.1} s",
        c.m2, c.lambda, r.stats.acceptance, r.stats.step
    );
    println!("  <|M|>/V  {}", show(&r.abs_m));
    println!("  <M^2>/V  {}", show(&r.m2));
    println!("  chi      {}", show(&r.chi));
    println!("  G_c(0)   {}", show(&r.two_point[0]));
    if let Some(path) = args.str("out") {
        let text = serde_json::to_string_pretty(&report(&model, &settings, &r, seconds))
            .map_err(|e| format!("cannot encode the report: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("cannot write '{path}': {e}"))?;
    }
    Ok(())
}

fn estimate_json(e: &Estimate) -> Value {
    json!({"mean": e.mean, "error": e.error, "tau_int": e.tau_int})
}

/// The JSON report of a run.
pub fn report(model: &Phi4, settings: &HmcSettings, r: &Phi4Reference, seconds: f64) -> Value {
    let c = model.couplings;
    let hopping = c.to_hopping();
    let l = model.size;
    // the zero-momentum correlator over the second lattice direction:
    // C(t) = sum_{x1} G_c(x1, t)
    let time_slices: Vec<Value> = (0..l)
        .map(|t| {
            let sum: f64 = (0..l).map(|x1| r.two_point[t * l + x1].mean).sum();
            json!(sum)
        })
        .collect();
    json!({
        "lattice": l,
        "couplings": {
            "m2": c.m2,
            "lambda": c.lambda,
            "kappa": hopping.map(|h| h.0),
            "lambda_h": hopping.map(|h| h.1),
        },
        "hmc": {
            "trajectories": settings.trajectories,
            "thermalize": settings.thermalize,
            "leapfrog": settings.leapfrog,
            "step": r.stats.step,
            "acceptance": r.stats.acceptance,
            "seed": settings.seed,
            "seconds": seconds,
        },
        "m_per_v": estimate_json(&r.m),
        "abs_m_per_v": estimate_json(&r.abs_m),
        "m2_per_v": estimate_json(&r.m2),
        "susceptibility": estimate_json(&r.chi),
        "two_point": r.two_point.iter().map(estimate_json).collect::<Vec<_>>(),
        "time_slices": time_slices,
        "histogram": r.histogram.iter().map(|(x, d)| json!([x, d])).collect::<Vec<_>>(),
    })
}
