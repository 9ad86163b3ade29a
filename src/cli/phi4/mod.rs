//! `flowplay phi4`: flows trained on the phi^4 lattice field and measured
//! against the reference from Hamiltonian Monte Carlo (`flowplay phi4 hmc`),
//! and the comparison of flow designs (`flowplay phi4 compare`).

mod compare;
mod report;

use super::{parse_precision, progress_printer, write_json};
use crate::bijection::Family;
use crate::flow::{Activation, ConvDesign, FlowModel};
use crate::mcmc::Estimate;
use crate::mcmc::hmc::HmcSettings;
use crate::phi4::design::Design;
use crate::phi4::observables::Phi4Observables;
use crate::phi4::reference::{Phi4Reference, reference};
use crate::run::backend::Backend;
use crate::run::limits;
use crate::run::model_file::model_to_json;
use crate::run::phi4::{check_flow_run, flow_run};
use crate::target::phi4::{Couplings, Phi4};
use crate::train::config::{Precision, RunPlan, Schedule};
use crate::train::{Loss, TrainSettings, default_threads};
use clap::{Args, Subcommand};
use serde_json::json;
use std::time::{Duration, Instant};

/// Flows on the phi^4 field (docs/mathematics.md, section 8). Without a
/// command it trains one flow by reverse KL (from the action alone, no
/// samples), then draws --samples configurations and corrects them two ways,
/// independent Metropolis-Hastings and importance weights, next to an HMC
/// reference: ESS/N, the IMH acceptance, the reverse KL, the fraction of
/// samples with M > 0 (1/2 for the symmetric target: the mode-collapse
/// measure), <|M|>/V and <M^2>/V.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Phi4Args {
    #[command(subcommand)]
    command: Option<Phi4Command>,
    #[command(flatten)]
    train: FlowArgs,
}

#[derive(Subcommand)]
enum Phi4Command {
    /// Train one flow on the field and measure it (the default).
    Train(FlowArgs),
    /// The same budget for an affine coupling flow, each analytic family and
    /// the Z2-equivariant designs, at a symmetric and a broken point, as one
    /// Markdown table.
    Compare(compare::CompareArgs),
    /// The HMC reference alone: <|M|>/V, <M^2>/V, the susceptibility and the
    /// two-point function, each with its error from the integrated
    /// autocorrelation time.
    Hmc(HmcArgs),
}

/// The lattice and its couplings, in either convention.
#[derive(Args)]
struct TheoryArgs {
    /// Lattice side L (even): the lattice is L x L with periodic boundaries
    #[arg(long, default_value_t = 8)]
    lattice: usize,
    /// Mass term of the standard convention (default -4)
    #[arg(long, allow_hyphen_values = true)]
    m2: Option<f64>,
    /// Quartic coupling of the standard convention (default 8)
    #[arg(long)]
    lambda: Option<f64>,
    /// Hopping parameter of the hopping convention
    #[arg(long)]
    kappa: Option<f64>,
    /// Quartic coupling of the hopping convention
    #[arg(long)]
    lambda_h: Option<f64>,
}

impl TheoryArgs {
    /// The couplings from either convention.
    fn couplings(&self) -> Result<Couplings, String> {
        let standard = self.m2.is_some() || self.lambda.is_some();
        let hopping = self.kappa.is_some() || self.lambda_h.is_some();
        match (standard, hopping) {
            (true, true) => Err(
                "give the couplings in one convention: --m2/--lambda or --kappa/--lambda-h".into(),
            ),
            (false, true) => Ok(Couplings::from_hopping(
                self.kappa.unwrap_or(f64::NAN),
                self.lambda_h.unwrap_or(0.0),
            )?),
            _ => Ok(Couplings {
                m2: self.m2.unwrap_or(-4.0),
                lambda: self.lambda.unwrap_or(8.0),
            }),
        }
    }

    fn model(&self) -> Result<Phi4, String> {
        limits::lattice(self.lattice)?;
        Ok(Phi4::new(self.lattice, self.couplings()?)?)
    }
}

/// How a flow trains on the lattice.
#[derive(Args)]
struct TrainingArgs {
    /// Training steps
    #[arg(long, default_value_t = 1000)]
    steps: usize,
    /// Fields per step
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Adam's learning rate
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Random seed
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// CPU arithmetic: f32 or f64
    #[arg(long, default_value = "f32", value_parser = parse_precision)]
    precision: Precision,
    /// cpu, or gpu (WGSL kernels for the lattice coupling flows; measuring stays on the CPU)
    #[arg(long, default_value = "cpu", value_parser = Backend::parse)]
    backend: Backend,
    /// CPU threads (default: all cores)
    #[arg(long)]
    threads: Option<usize>,
    /// Flow samples drawn for the estimates
    #[arg(long, default_value_t = 20_000)]
    samples: usize,
    /// HMC trajectories of the reference (0: none)
    #[arg(long, default_value_t = 10_000)]
    trajectories: usize,
    /// Learning-rate schedule: constant, or cosine (decays to 1% of --lr by
    /// the last step or the time limit, whichever comes first)
    #[arg(long, default_value = "constant", value_parser = Schedule::parse)]
    schedule: Schedule,
    /// Stop training after this many minutes even with steps left (the
    /// estimates follow); for a long run give many --steps and a time
    #[arg(long)]
    minutes: Option<f64>,
    /// Write the model, with its step, to this file every --checkpoint-every
    /// steps and at the end (readable by `flowplay eval --model`)
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<String>,
    /// Steps between checkpoints
    #[arg(long, default_value_t = 500)]
    checkpoint_every: usize,
    /// Write the JSON report to this file
    #[arg(long, value_name = "FILE")]
    out: Option<String>,
    /// No progress output
    #[arg(long)]
    quiet: bool,
}

impl TrainingArgs {
    /// The time limit, checked: a positive number of minutes up to a week.
    fn time_limit(&self) -> Result<Option<Duration>, String> {
        match self.minutes {
            None => Ok(None),
            Some(m) if m > 0.0 && m <= 7.0 * 24.0 * 60.0 => {
                Ok(Some(Duration::from_secs_f64(m * 60.0)))
            }
            Some(m) => Err(format!(
                "--minutes must be more than 0 and at most a week (10080), got {m}"
            )),
        }
    }

    fn settings(&self) -> TrainSettings {
        TrainSettings {
            batch: self.batch,
            learning_rate: self.lr,
            seed: self.seed,
            loss: Loss::ReverseKl,
            threads: self.threads.unwrap_or_else(default_threads).max(1),
        }
    }
}

/// One flow on the lattice.
#[derive(Args)]
struct FlowArgs {
    #[command(flatten)]
    theory: TheoryArgs,
    /// coupling (checkerboard masks, 3 x 3 convolutional conditioner), radial
    /// (the whole field along rays from a centre) or elementwise (one stack on
    /// every site)
    #[arg(long, default_value = "coupling", value_parser = Design::parse_kind)]
    flow: crate::flow::FlowKind,
    /// The site map: cubic_rational, sinh, cubic, affine, spline, or two
    /// joined by '+' for a composite map, e.g. affine+cubic_rational (affine
    /// first in the sampling direction, then one or --stack copies of the second)
    #[arg(long, default_value = "cubic_rational", value_parser = Design::parse_site_maps)]
    family: (Option<Family>, Family),
    /// Z2-equivariant: odd site maps with an even/odd conditioner, or the
    /// radial centre fixed at 0; the density is symmetric under phi -> -phi
    #[arg(long)]
    z2: bool,
    /// Copies of the family per site (default 1; 16 for radial flows)
    #[arg(long)]
    stack: Option<usize>,
    /// Coupling layers (default 8)
    #[arg(long)]
    layers: Option<usize>,
    /// Conditioner channels (default 8)
    #[arg(long)]
    width: Option<usize>,
    /// Conditioner residual blocks (default 1)
    #[arg(long)]
    depth: Option<usize>,
    #[command(flatten)]
    conditioner: ConditionerArgs,
    #[command(flatten)]
    training: TrainingArgs,
}

/// The lattice conditioner's design beyond width and depth.
#[derive(Args)]
struct ConditionerArgs {
    /// Plain (not residual) conditioner with these hidden channels, e.g. 8,8
    /// for 1 -> 8 -> 8 -> out (--width and --depth then do not apply)
    #[arg(long, value_delimiter = ',')]
    channels: Option<Vec<usize>>,
    /// Kernel side of the conditioner's convolutions (odd, 1 to 7)
    #[arg(long, default_value_t = 3)]
    kernel: usize,
    /// gelu, leaky_relu or tanh
    #[arg(long, default_value = "gelu", value_parser = Activation::parse)]
    activation: Activation,
    /// Bound B of the output head B tanh(out / B), started where the identity
    /// head starts (0: the identity head)
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    head_bound: f64,
}

impl ConditionerArgs {
    fn conv(&self) -> ConvDesign {
        ConvDesign {
            kernel: self.kernel,
            activation: self.activation,
            channels: self.channels.clone(),
            head_bound: self.head_bound,
        }
    }
}

/// The HMC reference alone.
#[derive(Args)]
struct HmcArgs {
    #[command(flatten)]
    theory: TheoryArgs,
    /// Trajectories measured
    #[arg(long, default_value_t = HmcSettings::default().trajectories)]
    trajectories: usize,
    /// Trajectories discarded first (the step size adapts towards 80% acceptance)
    #[arg(long, default_value_t = HmcSettings::default().thermalize)]
    thermalize: usize,
    /// Leapfrog steps per trajectory
    #[arg(long, default_value_t = HmcSettings::default().leapfrog)]
    leapfrog: usize,
    /// Initial leapfrog step size
    #[arg(long, default_value_t = HmcSettings::default().step)]
    step: f64,
    /// Random seed
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the JSON report: every estimate as {mean, error, tau_int}, the
    /// full two-point function and the histogram of M/V
    #[arg(long, value_name = "FILE")]
    out: Option<String>,
}

pub fn run(args: Phi4Args) -> Result<(), String> {
    match args.command {
        Some(Phi4Command::Hmc(hmc_args)) => hmc(hmc_args),
        Some(Phi4Command::Compare(compare_args)) => compare::run(compare_args),
        Some(Phi4Command::Train(flow_args)) => train(flow_args),
        None => train(args.train),
    }
}

fn hmc(args: HmcArgs) -> Result<(), String> {
    let model = args.theory.model()?;
    let settings = HmcSettings {
        trajectories: args.trajectories,
        thermalize: args.thermalize,
        leapfrog: args.leapfrog,
        step: args.step,
        seed: args.seed,
    };
    if settings.trajectories < 2 {
        return Err("--trajectories must be at least 2".into());
    }
    limits::trajectories(settings.trajectories)?;
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
        "phi4 L={} m2={} lambda={}: acceptance {:.3}, step {:.4}, {seconds:.1} s",
        model.size, c.m2, c.lambda, r.stats.acceptance, r.stats.step
    );
    let obs = &r.observables;
    println!("  <|M|>/V  {}", show(&obs.abs_m));
    println!("  <M^2>/V  {}", show(&obs.m2));
    println!("  chi      {}", show(&obs.chi));
    println!("  G_c(0)   {}", show(&obs.two_point[0]));
    if let Some(path) = &args.out {
        write_json(path, &report::report(&model, &settings, &r, seconds))?;
    }
    Ok(())
}

/// The HMC reference at `model` (None for 0 trajectories), with its progress
/// unless `quiet`.
fn hmc_reference(
    model: &Phi4,
    trajectories: usize,
    seed: u64,
    quiet: bool,
) -> Result<Option<Phi4Reference>, String> {
    if trajectories == 0 {
        return Ok(None);
    }
    limits::trajectories(trajectories)?;
    let settings = HmcSettings {
        trajectories: trajectories.max(2),
        seed,
        ..HmcSettings::default()
    };
    let start = Instant::now();
    let report = |done: usize, total: usize| {
        if !quiet {
            eprintln!(
                "hmc reference: {done}/{total} trajectories ({:.1} s)",
                start.elapsed().as_secs_f64()
            );
        }
    };
    Ok(Some(reference(model, &settings, report)?))
}

/// Writes `{"step": N, "model": ...}` to `path` through a temporary file, so
/// a run stopped while writing keeps the previous checkpoint whole.
fn write_checkpoint(path: &str, step: usize, model: &FlowModel<f64>) -> Result<(), String> {
    let v = json!({ "step": step, "model": model_to_json(model) });
    let tmp = format!("{path}.tmp");
    write_json(&tmp, &v)?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write the checkpoint {path}: {e}"))
}

fn train(args: FlowArgs) -> Result<(), String> {
    let model = args.theory.model()?;
    let (first, family) = args.family;
    let mut design = Design::new(args.flow, family, args.z2)?;
    let f = &mut design.flow;
    f.first = first;
    f.stack = args.stack.unwrap_or(f.stack);
    f.layers = args.layers.unwrap_or(f.layers);
    f.width = args.width.unwrap_or(f.width);
    f.depth = args.depth.unwrap_or(f.depth);
    f.conv = args.conditioner.conv();
    let t = &args.training;
    let time_limit = t.time_limit()?;
    check_flow_run(&model, &design, &t.settings(), t.samples)?;
    let reference = hmc_reference(&model, t.trajectories, t.seed, t.quiet)?;
    let mut progress = progress_printer(
        format!("{}: ", design.label()),
        t.steps,
        time_limit.map(|d| d.as_secs_f64()),
        t.quiet,
    );
    let mut checkpoint_error = None;
    let mut checkpoint = |step: usize, model: &FlowModel<f64>| {
        if let Some(path) = &t.checkpoint
            && let Err(e) = write_checkpoint(path, step, model)
        {
            checkpoint_error.get_or_insert(e);
        }
    };
    let plan = RunPlan {
        schedule: t.schedule,
        time_limit,
        checkpoint_every: if t.checkpoint.is_some() {
            t.checkpoint_every.max(1)
        } else {
            0
        },
        checkpoint: &mut checkpoint,
    };
    let run = flow_run(
        &model,
        &design,
        t.steps,
        t.settings(),
        t.precision,
        t.backend,
        t.samples,
        plan,
        &mut progress,
    )?;
    if let Some(e) = checkpoint_error {
        return Err(e);
    }
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
    if let Some(path) = &t.out {
        let v = report::flow_report(&model, &design, &run, reference.as_ref());
        write_json(path, &v)?;
    }
    if let Some(stopped) = &run.outcome.stopped {
        return Err(stopped.to_string());
    }
    Ok(())
}
