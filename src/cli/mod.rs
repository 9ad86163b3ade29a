//! The `flowplay` command-line tool: `eval`, `train`, `bench`, `phi4` and `export`,
//! parsed by clap (`--help` and `-h` on every command, `--version`).
//!
//! A mistake in the arguments is clap's message and exit code 2; a failure
//! while running is one line on stderr (`flowplay train: error: ...`) and exit
//! code 1; never a panic.

pub mod bench;
pub mod eval;
pub mod export;
pub mod phi4;
pub mod train;

use crate::target::{ImageDensity, Target};
use clap::{Parser, Subcommand};
use std::time::Instant;

/// What `flowplay --help` shows after the commands.
const CHOICES: &str = "\
families: cubic_rational, sinh, cubic, affine, spline
flows:    radial, radial-fourier, coupling, elementwise, lattice (phi4:... targets)
targets:  moons, 8gaussians, rings, circles, pinwheel, 2spirals, checkerboard, swissroll,
          spiral, line, cos, annulus, poly1d, twomoons-energy, circular-gmm, ring-mixture,
          image:PATH (PNG or JPEG; image:PATH:invert samples dark pixels),
          phi4:L=8,m2=-4,lambda=8 (the lattice field; see flowplay phi4 --help)

The mathematics: docs/mathematics.md in the project's repository.";

/// flowplay: train and evaluate analytic-bijection normalizing flows.
#[derive(Parser)]
#[command(name = "flowplay", version, after_help = CHOICES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply a model to points: the points pushed through it and their log-dets, as JSON.
    Eval(eval::EvalArgs),
    /// Train a flow on a target, with progress, a summary line and a JSON report.
    Train(Box<train::TrainArgs>),
    /// Training and density-evaluation speed of the reference recipes, CPU and GPU.
    Bench(bench::BenchArgs),
    /// Flows on the phi^4 lattice field, the HMC reference, and their comparison.
    Phi4(Box<phi4::Phi4Args>),
    /// A trained model as a Python script that rebuilds it in bijx and checks it.
    Export(export::ExportArgs),
}

/// Runs the tool on `argv` (without the program name); returns the exit code.
pub fn main(argv: &[String]) -> i32 {
    let args = std::iter::once("flowplay".to_string()).chain(argv.iter().cloned());
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version land here too, printed to stdout, exit 0
            let _ = e.print();
            return e.exit_code();
        }
    };
    let (name, result) = match cli.command {
        Command::Eval(args) => ("eval", eval::run(args)),
        Command::Train(args) => ("train", train::run(*args)),
        Command::Bench(args) => ("bench", bench::run(args)),
        Command::Phi4(args) => ("phi4", phi4::run(*args)),
        Command::Export(args) => ("export", export::run(args)),
    };
    match result {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("flowplay {name}: error: {message}");
            1
        }
    }
}

/// A target by name, or `image:PATH[:invert]` read from a file.
pub fn parse_target(name: &str) -> Result<Target, String> {
    if let Some(rest) = name.strip_prefix("image:") {
        let (path, invert) = match rest.strip_suffix(":invert") {
            Some(p) => (p, true),
            None => (rest, false),
        };
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read image '{path}': {e}"))?;
        let img =
            ImageDensity::from_bytes(&bytes, invert).map_err(|e| format!("image '{path}': {e}"))?;
        return Ok(Target::Image(img));
    }
    Ok(Target::parse(name)?)
}

/// Reads and parses a JSON file.
pub fn read_json(path: &str, what: &str) -> Result<serde_json::Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {what} '{path}': {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{what} '{path}' is not valid JSON: {e}"))
}

/// Writes `v` as pretty JSON to `path`.
pub fn write_json(path: &str, v: &serde_json::Value) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(v).map_err(|e| format!("cannot encode the report: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("cannot write '{path}': {e}"))
}

/// Progress lines on stderr every twentieth of a run of `total` steps or of
/// its time limit (and at least every 10 s), with the rate and an estimate of the time left: the
/// steps left at the rate so far, or the time limit's rest if that is sooner.
pub fn progress_printer(
    label: String,
    total: usize,
    time_limit: Option<f64>,
    quiet: bool,
) -> impl FnMut(usize, f64) {
    let every = (total / 20).max(1);
    let start = Instant::now();
    let mut last_print = 0.0;
    let seconds_between = time_limit.map_or(10.0, |limit| (limit / 20.0).min(10.0));
    move |step, loss| {
        let t = start.elapsed().as_secs_f64();
        let due = step.is_multiple_of(every) || step == total || t - last_print >= seconds_between;
        if quiet || !due {
            return;
        }
        last_print = t;
        let rate = step as f64 / t.max(1e-9);
        let by_steps = (total - step) as f64 / rate.max(1e-9);
        let eta = time_limit.map_or(by_steps, |limit| by_steps.min((limit - t).max(0.0)));
        eprintln!(
            "{label}step {step:>7}/{total}  loss {loss:>9.4}  {rate:>8.1} steps/s  eta {eta:>6.1} s"
        );
    }
}

/// `f32` or `f64`, for `--precision`.
pub fn parse_precision(name: &str) -> Result<crate::train::config::Precision, String> {
    match name {
        "f32" => Ok(crate::train::config::Precision::F32),
        "f64" => Ok(crate::train::config::Precision::F64),
        other => Err(format!("--precision must be f32 or f64, got '{other}'")),
    }
}
