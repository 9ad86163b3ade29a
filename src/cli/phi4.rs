//! `flowplay phi4`: flows trained on the phi^4 lattice field and measured
//! against the reference from Hamiltonian Monte Carlo (`flowplay phi4 hmc`),
//! and the comparison of flow designs (`flowplay phi4 compare`).

use super::Args;
use crate::bijection::Family;
use crate::flow::FlowKind;
use crate::mcmc::Estimate;
use crate::mcmc::hmc::HmcSettings;
use crate::phi4::design::{Design, comparison_designs};
use crate::phi4::observables::Phi4Observables;
use crate::phi4::reference::{Phi4Reference, reference};
use crate::run::backend::Backend;
use crate::run::model_file::model_to_json;
use crate::run::phi4::{Phi4FlowRun, flow_run};
use crate::target::phi4::{Couplings, Phi4};
use crate::train::config::Precision;
use crate::train::{Loss, TrainSettings, default_threads};
use serde_json::{Value, json};
use std::time::Instant;

pub const HELP: &str = "\
flowplay phi4 [train] --lattice 8 (--m2 -4 --lambda 8 | --kappa K --lambda-h L)
              [--flow coupling|radial|elementwise] [--family cubic_rational] [--z2]
              [--stack K] [--layers 8] [--width 8] [--depth 1]
              [--steps 1000] [--batch 256] [--lr 3e-3] [--seed 0] [--precision f32|f64]
              [--backend cpu|gpu] [--samples 20000] [--trajectories 10000] [--out run.json] [--quiet]

Trains a flow on the phi^4 field by reverse KL (from the action alone, no
samples), then draws --samples configurations and corrects them two ways:
independent Metropolis-Hastings and importance weights. Reports ESS/N, the IMH
acceptance, the reverse KL, the fraction of flow samples with M > 0 (1/2 for
the symmetric target: the mode-collapse measure), and <|M|>/V, <M^2>/V, the
susceptibility and G_c from both corrections next to an HMC reference of
--trajectories trajectories (0: none).

Flows: 'coupling' is the lattice coupling flow (checkerboard masks, 3 x 3
convolutional conditioner with --width channels and --depth residual blocks,
--layers coupling layers, a --stack of the family on each site); 'radial'
moves the whole field along rays from a centre; 'elementwise' is one stack on
every site. --z2 makes coupling and radial flows Z2-equivariant (odd site maps
with an even/odd conditioner; the radial centre fixed at 0), so the flow's
density is symmetric under phi -> -phi and cannot collapse onto one sign.
--backend gpu trains coupling flows with WGSL kernels through wgpu (float32;
not the Z2 radial flow); measuring the samples stays on the CPU.

flowplay phi4 compare [--lattice 8] [--m2 -4 --lambda 8] [--broken-m2 -4 --broken-lambda 2]
                      [--steps 1000] [--batch 256] [--lr 3e-3] [--samples 20000] [--seed 0]
                      [--backend cpu|gpu] [--out compare.json]

Trains, with the same budget, an affine coupling flow, a coupling flow of each
analytic family and the Z2-equivariant designs (coupling with cubic_rational
and with sinh, radial with cubic) at a symmetric and a broken point, and prints
one Markdown table (ESS/N, acceptance, reverse KL, fraction M > 0, <M>/V and
<|M|>/V from IMH, and <|M|>/V from HMC). --out keeps every run's full report.
With --backend gpu the coupling flows train on the GPU, the Z2 radial flow
still on the CPU.

flowplay phi4 hmc --lattice 8 (--m2 -4 --lambda 8 | --kappa K --lambda-h L)
                  [--trajectories 10000] [--thermalize 1000] [--leapfrog 10]
                  [--step 0.1] [--seed 0] [--out hmc.json]

phi^4 on an L x L periodic lattice (docs/mathematics.md, section 8), sampled by Hamiltonian
Monte Carlo (leapfrog, Metropolis-corrected; the step size adapts towards 80%
acceptance while thermalizing). Couplings in the standard convention (--m2,
--lambda) or the hopping one (--kappa, --lambda-h); both are reported.
Prints <|M|>/V, <M^2>/V, the susceptibility and the connected two-point
function's time-slice sum, each with its error (from the integrated
autocorrelation time, also reported). --out writes the JSON report: every
estimate as {mean, error, tau_int}, the full two-point function G_c(x) over the
L x L displacements, and the histogram of M/V.";

pub fn run(argv: &[String]) -> Result<(), String> {
    match argv.split_first() {
        Some((sub, rest)) if sub == "hmc" => hmc(rest),
        Some((sub, rest)) if sub == "compare" => compare(rest),
        Some((sub, rest)) if sub == "train" => train(rest),
        Some((sub, _)) if !sub.starts_with("--") => Err(format!(
            "unknown phi4 command '{sub}' (expected hmc, compare, or options to train a flow; see flowplay help phi4)"
        )),
        _ => train(argv),
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
    let obs = &r.observables;
    println!("  <|M|>/V  {}", show(&obs.abs_m));
    println!("  <M^2>/V  {}", show(&obs.m2));
    println!("  chi      {}", show(&obs.chi));
    println!("  G_c(0)   {}", show(&obs.two_point[0]));
    if let Some(path) = args.str("out") {
        let text = serde_json::to_string_pretty(&report(&model, &settings, &r, seconds))
            .map_err(|e| format!("cannot encode the report: {e}"))?;
        std::fs::write(path, text).map_err(|e| format!("cannot write '{path}': {e}"))?;
    }
    Ok(())
}

/// The options of a flow run on the lattice.
const TRAIN_OPTIONS: &[&str] = &[
    "lattice",
    "m2",
    "lambda",
    "kappa",
    "lambda-h",
    "flow",
    "family",
    "stack",
    "layers",
    "width",
    "depth",
    "steps",
    "batch",
    "lr",
    "seed",
    "precision",
    "backend",
    "threads",
    "samples",
    "trajectories",
    "out",
];

/// `(flow - reference) / combined error` of one observable.
fn pull(flow: &Estimate, reference: &Estimate) -> f64 {
    (flow.mean - reference.mean) / (flow.error.powi(2) + reference.error.powi(2)).sqrt()
}

fn flow_report(
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

fn finite_or_null(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

/// Progress lines every twentieth of a run.
fn progress_printer(label: String, total: usize, quiet: bool) -> impl FnMut(usize, f64) {
    let every = (total / 20).max(1);
    let start = Instant::now();
    move |step, loss| {
        if !quiet && (step.is_multiple_of(every) || step == total) {
            eprintln!(
                "{label}: step {step:>6}/{total}  loss {loss:>10.4}  {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
}

/// The HMC reference at `model` (None for 0 trajectories).
fn hmc_reference(
    model: &Phi4,
    trajectories: usize,
    seed: u64,
) -> Result<Option<Phi4Reference>, String> {
    if trajectories == 0 {
        return Ok(None);
    }
    let settings = HmcSettings {
        trajectories: trajectories.max(2),
        seed,
        ..HmcSettings::default()
    };
    reference(model, &settings, |_, _| {}).map(Some)
}

fn train_settings(args: &Args) -> Result<(TrainSettings, Precision, Backend), String> {
    let precision = match args.str("precision").unwrap_or("f32") {
        "f32" => Precision::F32,
        "f64" => Precision::F64,
        other => return Err(format!("--precision must be f32 or f64, got '{other}'")),
    };
    let settings = TrainSettings {
        batch: args.get("batch", 256)?,
        learning_rate: args.get("lr", 3e-3)?,
        seed: args.get("seed", 0)?,
        loss: Loss::ReverseKl,
        threads: args.get("threads", default_threads())?.max(1),
    };
    let backend = Backend::parse(args.str("backend").unwrap_or("cpu"))?;
    Ok((settings, precision, backend))
}

fn train(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, TRAIN_OPTIONS, &["z2", "quiet"])?;
    let model = Phi4::new(args.get("lattice", 8)?, couplings(&args)?)?;
    let family = Family::parse(args.str("family").unwrap_or("cubic_rational"))?;
    let kind = Design::parse_kind(args.str("flow").unwrap_or("coupling"))?;
    let mut design = Design::new(kind, family, args.flag("z2"))?;
    let f = &mut design.flow;
    f.stack = args.get("stack", f.stack)?;
    f.layers = args.get("layers", f.layers)?;
    f.width = args.get("width", f.width)?;
    f.depth = args.get("depth", f.depth)?;
    let (settings, precision, backend) = train_settings(&args)?;
    let steps = args.get("steps", 1000)?;
    let samples = args.get("samples", 20_000)?;
    let seed = settings.seed;
    let reference = hmc_reference(&model, args.get("trajectories", 10_000)?, seed)?;
    let mut progress = progress_printer(design.label(), steps, args.flag("quiet"));
    let run = flow_run(
        &model,
        &design,
        steps,
        settings,
        precision,
        backend,
        samples,
        &mut progress,
    )?;
    let e = &run.estimates;
    let c = model.couplings;
    println!(
        "phi4 L={} m2={} lambda={}, {} ({} params): {} steps in {:.1} s",
        model.size,
        c.m2,
        c.lambda,
        design.label(),
        run.outcome.model.as_flow().n_params(),
        run.outcome.steps,
        run.outcome.seconds
    );
    println!(
        "  ESS/N {:.3}  IMH acceptance {:.3}  reverse KL {:.3}  M>0 fraction {:.3}",
        e.ess, e.acceptance, e.reverse_kl, e.positive_fraction
    );
    let show = |x: &Estimate| format!("{:.4} +- {:.4}", x.mean, x.error);
    let hmc = |pick: fn(&Phi4Observables) -> &Estimate| {
        reference.as_ref().map_or(String::new(), |r| {
            format!("   HMC {}", show(pick(&r.observables)))
        })
    };
    println!(
        "  <|M|>/V  IMH {}   reweighted {}{}",
        show(&e.imh.abs_m),
        show(&e.reweighted.abs_m),
        hmc(|o| &o.abs_m)
    );
    println!(
        "  <M^2>/V  IMH {}   reweighted {}{}",
        show(&e.imh.m2),
        show(&e.reweighted.m2),
        hmc(|o| &o.m2)
    );
    if let Some(path) = args.str("out") {
        write_json(
            path,
            &flow_report(&model, &design, &run, reference.as_ref()),
        )?;
    }
    if let Some(stopped) = &run.outcome.stopped {
        return Err(stopped.to_string());
    }
    Ok(())
}

fn write_json(path: &str, v: &Value) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(v).map_err(|e| format!("cannot encode the report: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("cannot write '{path}': {e}"))
}

fn compare(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(
        argv,
        &[
            "lattice",
            "m2",
            "lambda",
            "broken-m2",
            "broken-lambda",
            "steps",
            "batch",
            "lr",
            "seed",
            "precision",
            "backend",
            "threads",
            "samples",
            "trajectories",
            "out",
        ],
        &["quiet"],
    )?;
    let size = args.get("lattice", 8)?;
    let points = [
        (
            "symmetric",
            Couplings {
                m2: args.get("m2", -4.0)?,
                lambda: args.get("lambda", 8.0)?,
            },
        ),
        (
            "broken",
            Couplings {
                m2: args.get("broken-m2", -4.0)?,
                lambda: args.get("broken-lambda", 2.0)?,
            },
        ),
    ];
    let (settings, precision, backend) = train_settings(&args)?;
    let steps = args.get("steps", 1000)?;
    let samples = args.get("samples", 20_000)?;
    let trajectories = args.get("trajectories", 10_000)?.max(2);
    let quiet = args.flag("quiet");
    let start = Instant::now();
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for (phase, couplings) in points {
        let model = Phi4::new(size, couplings)?;
        let reference = hmc_reference(&model, trajectories, settings.seed)?
            .ok_or_else(|| "the comparison needs an HMC reference".to_string())?;
        for design in comparison_designs() {
            let label = format!("{phase} {}", design.label());
            let mut progress = progress_printer(label, steps, quiet);
            // the Z2 radial flow's fixed centre is the CPU trainer's alone
            let fixed_centre = design.flow.fixed_centre();
            let run = flow_run(
                &model,
                &design,
                steps,
                settings.clone(),
                precision,
                if fixed_centre { Backend::Cpu } else { backend },
                samples,
                &mut progress,
            )?;
            let e = &run.estimates;
            let h = &reference.observables;
            rows.push(format!(
                "| {phase} (m2={}, lambda={}) | {} | {:.3} | {:.3} | {:.2} | {:.3} | {:+.3} | {:.3} +- {:.3} | {:.3} +- {:.3} |",
                couplings.m2,
                couplings.lambda,
                design.label(),
                e.ess,
                e.acceptance,
                e.reverse_kl,
                e.positive_fraction,
                e.imh.m.mean,
                e.imh.abs_m.mean,
                e.imh.abs_m.error,
                h.abs_m.mean,
                h.abs_m.error,
            ));
            reports.push(flow_report(&model, &design, &run, Some(&reference)));
        }
    }
    println!(
        "L = {size}, {steps} steps of batch {}, lr {}, {samples} samples each ({:.0} s):\n",
        settings.batch,
        settings.learning_rate,
        start.elapsed().as_secs_f64()
    );
    println!(
        "| point | flow | ESS/N | IMH acceptance | reverse KL | fraction M > 0 | <M>/V (IMH; exact 0) | <\\|M\\|>/V (IMH) | <\\|M\\|>/V (HMC) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    if let Some(path) = args.str("out") {
        write_json(path, &json!({ "runs": reports }))?;
    }
    Ok(())
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
