//! `flowplay train`: one training run with progress, a summary line and a JSON report.

use super::{Args, parse_target};
use crate::bijection::{Family, SplineShape};
use crate::flow::{FlowConfig, FlowKind};
use crate::run::backend::{Backend, trainer};
use crate::run::report::report;
use crate::train::config::{Precision, RunConfig, train_with};
use crate::train::{Loss, TrainSettings, default_threads};
use std::io::Write;
use std::time::Instant;

pub const HELP: &str = "\
flowplay train [options]

  --target NAME        spiral (default), moons, 8gaussians, rings, circles, pinwheel, 2spirals,
                       checkerboard, swissroll, line, cos, annulus, poly1d, twomoons-energy,
                       circular-gmm, ring-mixture, image:PATH[:invert]
  --flow KIND          radial-fourier (default in 2D), radial, coupling, elementwise (default in 1D)
  --family NAME        cubic (default), cubic_rational, sinh, affine, spline
  --stack K            copies of the family per scalar map (default 64 radial, 1 coupling)
  --layers N --width W --depth D     coupling conditioner (default 8, 128, 2)
  --fourier-order N    angle features of radial-fourier (default 3)
  --center X,Y         radial centre (default (-0.5,-1) for spiral, else random N(0, 1))
  --log-scale X,Y      radial log-scales (default 0 for spiral, else random N(0, 0.1^2))
  --spline-bins K --spline-bound B   spline shape (default 8 bins on [-5, 5])
  --steps N (5000) --batch B (512) --lr LR (1e-2) --seed S (0)
  --loss forward-kl|reverse-kl       default: forward for sample targets, reverse for energies
  --backend cpu|gpu    the CPU trainer (default), or WGSL kernels through wgpu
                       (so far: radial flows, every family)
  --precision f32|f64  CPU arithmetic (default f32, as the GPU)
  --threads N          CPU threads (default: all cores)
  --eval-samples N     fresh samples for held-out metrics (default 20000)
  --out FILE           write the JSON report, with the trained model
  --quiet              no progress output";

const OPTIONS: &[&str] = &[
    "target",
    "flow",
    "family",
    "stack",
    "layers",
    "width",
    "depth",
    "fourier-order",
    "center",
    "log-scale",
    "spline-bins",
    "spline-bound",
    "steps",
    "batch",
    "lr",
    "seed",
    "loss",
    "backend",
    "precision",
    "threads",
    "eval-samples",
    "out",
];

/// Reads a run's configuration from command-line options.
pub fn config_from_args(args: &Args) -> Result<RunConfig, String> {
    let target_name = args.str("target").unwrap_or("spiral");
    let target = parse_target(target_name)?;
    let default_kind = if target.dim() == 1 {
        FlowKind::Elementwise
    } else {
        FlowKind::RadialFourier
    };
    let kind = match args.str("flow") {
        Some(k) => FlowKind::parse(k)?,
        None => default_kind,
    };
    let mut flow = FlowConfig::defaults(kind);
    let mut family = Family::parse(args.str("family").unwrap_or("cubic"))?;
    if let Family::Spline(_) = family {
        let shape = SplineShape {
            bins: args.get("spline-bins", SplineShape::default().bins)?,
            bound: args.get("spline-bound", SplineShape::default().bound)?,
        };
        shape.validate()?;
        family = Family::Spline(shape);
    }
    flow.family = family;
    flow.stack = args.get("stack", flow.stack)?;
    flow.layers = args.get("layers", flow.layers)?;
    flow.width = args.get("width", flow.width)?;
    flow.depth = args.get("depth", flow.depth)?;
    flow.fourier_order = args.get("fourier-order", flow.fourier_order)?;
    // the paper's reference recipe: the spiral flow starts at centre (-0.5, -1), log-scale 0.
    let spiral = target_name == "spiral";
    flow.center = match args.str("center") {
        Some(text) => Some(parse_vector(text, target.dim(), "--center")?),
        None if spiral => Some(vec![-0.5, -1.0]),
        None => None,
    };
    flow.log_scale = match args.str("log-scale") {
        Some(text) => Some(parse_vector(text, target.dim(), "--log-scale")?),
        None if spiral => Some(vec![0.0, 0.0]),
        None => None,
    };
    if kind == FlowKind::RadialFourier && target.dim() != 2 {
        return Err("radial-fourier is 2D only; use radial or elementwise for 1D targets".into());
    }
    if kind == FlowKind::Coupling && target.dim() < 2 {
        return Err(
            "a coupling flow needs at least 2 dimensions; use elementwise for 1D targets".into(),
        );
    }
    let loss = match args.str("loss") {
        None => Loss::for_target(&target),
        Some("forward-kl") => Loss::ForwardKl,
        Some("reverse-kl") => Loss::ReverseKl,
        Some(other) => {
            return Err(format!(
                "--loss must be forward-kl or reverse-kl, got '{other}'"
            ));
        }
    };
    let precision = match args.str("precision").unwrap_or("f32") {
        "f32" => Precision::F32,
        "f64" => Precision::F64,
        other => return Err(format!("--precision must be f32 or f64, got '{other}'")),
    };
    let settings = TrainSettings {
        batch: args.get("batch", 512)?,
        learning_rate: args.get("lr", 1e-2)?,
        seed: args.get("seed", 0)?,
        loss,
        threads: args.get("threads", default_threads())?.max(1),
    };
    Ok(RunConfig {
        target,
        flow,
        steps: args.get("steps", 5000)?,
        settings,
        precision,
        eval_samples: args.get("eval-samples", 20_000)?.max(1),
    })
}

fn parse_vector(text: &str, dim: usize, option: &str) -> Result<Vec<f64>, String> {
    let v: Result<Vec<f64>, _> = text.split(',').map(|s| s.trim().parse::<f64>()).collect();
    let v = v.map_err(|_| format!("{option}: cannot read '{text}' as numbers like -0.5,-1"))?;
    if v.len() != dim || v.iter().any(|x| !x.is_finite()) {
        return Err(format!("{option} needs {dim} finite numbers, got '{text}'"));
    }
    Ok(v)
}

pub fn run(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, OPTIONS, &["quiet"])?;
    let config = config_from_args(&args)?;
    let backend = Backend::parse(args.str("backend").unwrap_or("cpu"))?;
    let quiet = args.flag("quiet");
    let out_path = args.str("out");
    let total = config.steps;
    let every = (total / 20).max(1);
    let start = Instant::now();
    let mut progress = |step: usize, loss: f64| {
        if !quiet && (step.is_multiple_of(every) || step == total) {
            let t = start.elapsed().as_secs_f64();
            let rate = step as f64 / t.max(1e-9);
            let eta = (total - step) as f64 / rate.max(1e-9);
            eprintln!(
                "step {step:>7}/{total}  loss {loss:>9.4}  {rate:>8.1} steps/s  eta {eta:>6.1} s"
            );
        }
    };
    let outcome = train_with(&config, trainer(&config, backend)?, &mut progress)?;
    let r = report(&config, &outcome);
    let metric = match (r.get("test_nll"), r.get("reverse_kl")) {
        (Some(v), _) if !v.is_null() => {
            format!("held-out NLL {:.4} nats", v.as_f64().unwrap_or(f64::NAN))
        }
        (_, Some(v)) if !v.is_null() => format!(
            "reverse KL {:.4}, ESS/N {:.3}",
            v.as_f64().unwrap_or(f64::NAN),
            r["ess"].as_f64().unwrap_or(f64::NAN)
        ),
        _ => "no held-out metric".into(),
    };
    println!(
        "{} {} {} x{}: {} steps in {:.2} s ({:.0} steps/s, {}), final loss {:.4}, {metric}, {} params",
        config.target.name(),
        config.flow.kind.name(),
        config.flow.family.name(),
        config.flow.stack,
        outcome.steps,
        outcome.seconds,
        outcome.steps as f64 / outcome.seconds.max(1e-9),
        outcome.backend,
        outcome.final_loss,
        r["n_params"],
    );
    if let Some(path) = out_path {
        let text = serde_json::to_string_pretty(&r)
            .map_err(|e| format!("cannot encode the report: {e}"))?;
        let mut file =
            std::fs::File::create(path).map_err(|e| format!("cannot write '{path}': {e}"))?;
        file.write_all(text.as_bytes())
            .map_err(|e| format!("cannot write '{path}': {e}"))?;
    }
    if let Some(e) = outcome.stopped {
        return Err(format!(
            "{e}{}",
            if out_path.is_some() {
                " (report written)"
            } else {
                ""
            }
        ));
    }
    Ok(())
}
