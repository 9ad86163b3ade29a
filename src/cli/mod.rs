//! The `flowplay` command-line tool: `eval`, `train`, `bench` and `phi4`.
//!
//! Every failure is one line on stderr and a non-zero exit code, never a panic.

mod args;
pub mod bench;
pub mod eval;
pub mod phi4;
pub mod train;

pub use args::Args;

use crate::target::{ImageDensity, Target};

const USAGE: &str = "\
flowplay: train and evaluate analytic-bijection normalizing flows

usage:
  flowplay eval  --model MODEL.json --points POINTS.json [--direction x_from_z|z_from_x] [--precision f64|f32]
  flowplay train --target spiral --flow radial-fourier --family cubic --stack 64 \\
                 --steps 5000 --batch 512 --lr 1e-2 --seed 0 [--backend cpu] [--out run.json]
  flowplay bench [--steps 100] [--backend cpu]
  flowplay phi4 --lattice 8 --m2 -4 --lambda 8 --flow coupling --family cubic_rational [--z2] \\
                 --steps 1000 [--out run.json]
  flowplay phi4 compare [--lattice 8] [--steps 1000] [--out compare.json]
  flowplay phi4 hmc --lattice 8 --m2 -4 --lambda 8 [--trajectories 10000] [--out hmc.json]
  flowplay help  [eval|train|bench|phi4]

families: cubic_rational, sinh, cubic, affine, spline
flows:    radial, radial-fourier, coupling, elementwise, lattice (phi4:... targets)
targets:  moons, 8gaussians, rings, circles, pinwheel, 2spirals, checkerboard, swissroll,
          spiral, line, cos, annulus, poly1d, twomoons-energy, circular-gmm, ring-mixture,
          image:PATH (PNG or JPEG; image:PATH:invert samples dark pixels),
          phi4:L=8,m2=-4,lambda=8 (the lattice field; see flowplay help phi4)";

/// Runs the tool on `argv` (without the program name); returns the exit code.
pub fn main(argv: &[String]) -> i32 {
    let Some((command, rest)) = argv.split_first() else {
        eprintln!("{USAGE}");
        return 2;
    };
    let result = match command.as_str() {
        "eval" => eval::run(rest),
        "train" => train::run(rest),
        "bench" => bench::run(rest),
        "phi4" => phi4::run(rest),
        "help" | "--help" | "-h" => {
            match rest.first().map(String::as_str) {
                Some("eval") => println!("{}", eval::HELP),
                Some("train") => println!("{}", train::HELP),
                Some("bench") => println!("{}", bench::HELP),
                Some("phi4") => println!("{}", phi4::HELP),
                _ => println!("{USAGE}"),
            }
            Ok(())
        }
        other => Err(format!(
            "unknown command '{other}' (expected eval, train, bench, phi4 or help)"
        )),
    };
    match result {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("flowplay {command}: error: {message}");
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
    Target::parse(name)
}

/// Reads and parses a JSON file.
pub fn read_json(path: &str, what: &str) -> Result<serde_json::Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {what} '{path}': {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{what} '{path}' is not valid JSON: {e}"))
}
