//! `flowplay bench`: throughput of the reference recipes, for comparing releases.

use crate::bijection::Family;
use crate::flow::{Flow, FlowConfig, FlowKind, FlowModel};
use crate::real::Real;
use crate::rng::Rng;
use crate::stats::log_normal;
use crate::target::Target;
use crate::train::{CpuTrainer, Loss, TrainSettings, Trainer, default_threads};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The script that trains an exported model in bijx (`--bijx`).
const BIJX_BENCH: &str = include_str!("../../scripts/bijx/bench.py");

/// Prints training steps per second for the reference recipes (direct radial
/// and angle-dependent radial flows on the spiral, 64 x cubic; coupling flow
/// 8 x 128 on moons) at each batch size, the phi^4 lab's lattice flows (unless
/// --batch is given, batches of 64 and 256 fields at L = 8, for the 8-layer
/// sinh flow and the lab's default of 16 layers with an affine map first, and
/// 64 Z2 fields at L = 16), and density evaluations per second on a grid (the 2D flows). Each
/// figure runs for about --seconds after two warm-up steps (and at least one
/// grid). The dispatches column counts the GPU compute dispatches of one
/// training step; the GPU column is n/a where no adapter was found.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Seconds each figure is measured for
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Batch sizes, comma-separated (default 512,8192; the lattice recipes have their own)
    #[arg(long, value_delimiter = ',')]
    batch: Option<Vec<usize>>,
    /// all, cpu or gpu
    #[arg(long, default_value = "all", value_parser = ["all", "cpu", "gpu"])]
    backend: String,
    /// CPU threads (default: all cores)
    #[arg(long)]
    threads: Option<usize>,
    /// Side of the density grid
    #[arg(long, default_value_t = 512)]
    grid: usize,
    /// Keep only the recipes whose name contains this (e.g. lattice)
    #[arg(long, default_value = "")]
    only: String,
    /// One JSON object instead of tables
    #[arg(long)]
    json: bool,
    /// A Python with bijx 1.3.2, jax and flax (e.g. .venv-bijx/bin/python):
    /// the radial and coupling recipes are also trained in bijx, on the CPU, from
    /// the same initial model (exported as `flowplay export --format bijx`
    /// writes it), and printed beside flowplay's CPU figures
    #[arg(long, value_name = "PYTHON")]
    bijx: Option<PathBuf>,
}

/// One reference recipe.
struct Recipe {
    name: &'static str,
    target: &'static str,
    flow: FlowConfig,
    /// its own batch sizes where --batch is not given (the lattice flow's
    /// batch is of fields, each V points)
    batches: Option<&'static [usize]>,
}

fn recipes() -> Vec<Recipe> {
    let mut radial = FlowConfig::defaults(FlowKind::Radial);
    radial.center = Some(vec![-0.5, -1.0]);
    radial.log_scale = Some(vec![0.0, 0.0]);
    let mut fourier = FlowConfig::defaults(FlowKind::RadialFourier);
    fourier.center = Some(vec![-0.5, -1.0]);
    fourier.log_scale = Some(vec![0.0, 0.0]);
    // the phi^4 lab's designs (crate::phi4::design::Design)
    let lattice = crate::phi4::design::Design::new(FlowKind::Lattice, Family::Sinh, false)
        .map(|d| d.flow)
        .unwrap_or_else(|e| unreachable!("a fixed design: {e}"));
    let lattice_z2 = FlowConfig {
        z2: true,
        ..lattice.clone()
    };
    // the lab's default: 16 layers, an affine map before the cubic rational one
    let lab_default = {
        let mut flow =
            crate::phi4::design::Design::new(FlowKind::Lattice, Family::CubicRational, false)
                .map(|d| d.flow)
                .unwrap_or_else(|e| unreachable!("a fixed design: {e}"));
        flow.layers = 16;
        flow.first = Some(Family::Affine);
        flow
    };
    vec![
        Recipe {
            name: "radial, spiral, 64 x cubic",
            target: "spiral",
            flow: radial,
            batches: None,
        },
        Recipe {
            name: "radial-fourier, spiral, 64 x cubic",
            target: "spiral",
            flow: fourier,
            batches: None,
        },
        Recipe {
            name: "coupling 8 x 128, moons, cubic",
            target: "moons",
            flow: FlowConfig::defaults(FlowKind::Coupling),
            batches: None,
        },
        Recipe {
            name: "lattice 8 x 8ch, phi4 L=8, sinh",
            target: "phi4:L=8,m2=-4,lambda=8",
            flow: lattice,
            batches: Some(&[64, 256]),
        },
        Recipe {
            name: "lattice 16 x 8ch, L=8, affine+cubic_rat",
            target: "phi4:L=8,m2=-4,lambda=8",
            flow: lab_default,
            batches: Some(&[64, 256]),
        },
        Recipe {
            name: "lattice 8 x 8ch Z2, phi4 L=16, sinh",
            target: "phi4:L=16,m2=-4,lambda=8",
            flow: lattice_z2,
            batches: Some(&[64]),
        },
    ]
}

/// What one bench run measures: its options, resolved.
struct Bench {
    seconds: f64,
    threads: usize,
    grid: usize,
    batches: Vec<usize>,
    /// whether --batch was given (the lattice recipes' own batches yield)
    batch_given: bool,
    backends: &'static [&'static str],
    json: bool,
    /// the Python that runs bijx, when asked
    bijx: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> Result<(), String> {
    let bench = Bench {
        seconds: args.seconds,
        threads: args.threads.unwrap_or_else(default_threads).max(1),
        grid: args.grid.max(2),
        batches: args.batch.clone().unwrap_or_else(|| vec![512, 8192]),
        batch_given: args.batch.is_some(),
        backends: match args.backend.as_str() {
            "cpu" => &["cpu"],
            "gpu" => &["gpu"],
            _ => &["cpu", "gpu"],
        },
        json: args.json,
        bijx: args.bijx.clone(),
    };
    let recipes: Vec<Recipe> = recipes()
        .into_iter()
        .filter(|r| r.name.contains(args.only.as_str()))
        .collect();
    if recipes.is_empty() {
        return Err(format!("no recipe's name contains '{}'", args.only));
    }
    let training = training_table(&bench, &recipes)?;
    let density_grid = grid_table(&bench, &recipes)?;
    if bench.json {
        let out: Value =
            json!({"threads": bench.threads, "training": training, "density_grid": density_grid});
        println!("{out}");
    }
    Ok(())
}

/// Training steps per second of every recipe at each batch size, printed as a
/// table (unless --json); the rows as JSON.
fn training_table(bench: &Bench, recipes: &[Recipe]) -> Result<Vec<Value>, String> {
    let mut rows = Vec::new();
    let mut gpu_note = None;
    let mut bijx_note = None;
    if !bench.json {
        println!(
            "flowplay bench: CPU {} threads, f32; GPU f32 through wgpu",
            bench.threads
        );
        if bench.backends.contains(&"gpu") {
            match gpu_adapter() {
                Ok(name) => println!("GPU adapter: {name}"),
                Err(e) => println!("GPU adapter: none ({e})"),
            }
        }
        let bijx_columns = match bench.bijx {
            Some(_) => format!(" {:>13} {:>11}", "bijx steps/s", "cpu / bijx"),
            None => String::new(),
        };
        println!(
            "{:<40} {:>7} {:>12} {:>12} {:>11}{bijx_columns}",
            "training recipe", "batch", "cpu steps/s", "gpu steps/s", "dispatches"
        );
    }
    for recipe in recipes {
        let own = recipe.batches.filter(|_| !bench.batch_given);
        for &batch in own.unwrap_or(&bench.batches) {
            let mut rates = Vec::new();
            let mut gpu_dispatches = 0;
            for &backend in bench.backends {
                let rate = match train_rate(recipe, batch, backend, bench.threads, bench.seconds) {
                    Ok(r) => Some(r),
                    Err(e) if backend == "gpu" => {
                        gpu_note.get_or_insert(e);
                        None
                    }
                    Err(e) => return Err(e),
                };
                if let Some((r, dispatches)) = rate {
                    rows.push(json!({"recipe": recipe.name, "backend": backend, "batch": batch, "steps_per_second": r, "dispatches_per_step": dispatches}));
                    gpu_dispatches = dispatches.unwrap_or(gpu_dispatches);
                }
                rates.push((backend, rate.map(|(r, _)| r)));
            }
            if !bench.json {
                let cell = |name: &str| match rates.iter().find(|(b, _)| *b == name) {
                    Some((_, Some(r))) if *r < 10.0 => format!("{r:.3}"),
                    Some((_, Some(r))) => format!("{r:.1}"),
                    Some((_, None)) => "n/a".to_string(),
                    None => "-".to_string(),
                };
                let dispatches = match gpu_dispatches {
                    0 => "-".to_string(),
                    n => n.to_string(),
                };
                let (name, cpu, gpu) = (recipe.name, cell("cpu"), cell("gpu"));
                print!("{name:<40} {batch:>7} {cpu:>12} {gpu:>12} {dispatches:>11}");
            }
            if let Some(python) = &bench.bijx {
                let ours = rates
                    .iter()
                    .find_map(|(b, r)| (*b == "cpu").then_some(*r).flatten());
                let theirs = bijx_rate(python, recipe, batch, bench);
                if let Ok(r) = &theirs {
                    rows.push(json!({"recipe": recipe.name, "backend": "bijx", "batch": batch, "steps_per_second": r}));
                }
                if !bench.json {
                    match (theirs, ours) {
                        (Ok(r), Some(cpu)) => print!(" {r:>13.1} {:>10.1}x", cpu / r),
                        (Ok(r), None) => print!(" {r:>13.1} {:>11}", "-"),
                        (Err(e), _) => {
                            print!(" {:>13} {:>11}", "n/a", "-");
                            bijx_note.get_or_insert(e);
                        }
                    }
                }
            }
            if !bench.json {
                println!();
            }
        }
    }
    if let Some(note) = &gpu_note
        && !bench.json
    {
        println!("gpu n/a: {note}");
    }
    if let Some(note) = &bijx_note
        && !bench.json
    {
        println!("bijx n/a: {note}");
    }
    Ok(rows)
}

/// Density evaluations per second of the 2D recipes on a grid, printed as a
/// table (unless --json); the rows as JSON.
fn grid_table(bench: &Bench, recipes: &[Recipe]) -> Result<Vec<Value>, String> {
    let grid = bench.grid;
    let planar: Vec<&Recipe> = recipes
        .iter()
        .filter(|r| r.flow.kind != FlowKind::Lattice)
        .collect();
    if !bench.json && !planar.is_empty() {
        println!(
            "{:<40} {:>7} {:>12} {:>12}",
            "density on a grid (evals/s)", "grid", "cpu", "gpu"
        );
    }
    let mut rng = Rng::seeded(1);
    let mut rows = Vec::new();
    for recipe in planar {
        let model: FlowModel<f64> = recipe.flow.build(2, &mut rng)?;
        let mut cells = Vec::new();
        for &backend in bench.backends {
            let rate = if backend == "cpu" {
                let flow = model.cast::<f32>();
                Some(grid_rate(flow.as_flow(), grid, bench.threads, bench.seconds).0)
            } else {
                gpu_grid_rate(&model, grid, bench.seconds).ok()
            };
            if let Some(r) = rate {
                rows.push(json!({"recipe": recipe.name, "backend": backend, "grid": grid, "evals_per_second": r}));
            }
            cells.push((backend, rate));
        }
        if !bench.json {
            let cell = |name: &str| match cells.iter().find(|(b, _)| *b == name) {
                Some((_, Some(r))) => format!("{r:.0}"),
                Some((_, None)) => "n/a".to_string(),
                None => "-".to_string(),
            };
            let size = format!("{grid}^2");
            let (name, cpu, gpu) = (recipe.name, cell("cpu"), cell("gpu"));
            println!("{name:<40} {size:>7} {cpu:>12} {gpu:>12}");
        }
    }
    Ok(rows)
}

/// Steps per second, and the GPU's compute dispatches per step.
fn train_rate(
    recipe: &Recipe,
    batch: usize,
    backend: &str,
    threads: usize,
    seconds: f64,
) -> Result<(f64, Option<usize>), String> {
    let target = Target::parse(recipe.target)?;
    let mut rng = Rng::seeded(0);
    let model = recipe.flow.build(target.dim(), &mut rng)?;
    let settings = TrainSettings {
        batch,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::for_target(&target),
        threads,
    };
    let (mut trainer, dispatches): (Box<dyn Trainer>, Option<usize>) = if backend == "gpu" {
        let (trainer, dispatches) = gpu_trainer(model, target, settings)?;
        (trainer, Some(dispatches))
    } else {
        (
            Box::new(CpuTrainer::<f32>::new(model, target, settings)?),
            None,
        )
    };
    for _ in 0..2 {
        trainer.step().map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    let mut steps = 0usize;
    while start.elapsed().as_secs_f64() < seconds {
        trainer.step().map_err(|e| e.to_string())?;
        steps += 1;
    }
    Ok((steps as f64 / start.elapsed().as_secs_f64(), dispatches))
}

/// Steps per second of `recipe` in bijx: its initial model (as
/// [`train_rate`] builds it) exported as a bijx script, trained by
/// `scripts/bijx/bench.py` under `python` for about as long as flowplay's figure.
fn bijx_rate(python: &Path, recipe: &Recipe, batch: usize, bench: &Bench) -> Result<f64, String> {
    if !matches!(recipe.target, "spiral" | "moons") {
        return Err(format!(
            "the bijx bench samples the spiral and the moons, not '{}'",
            recipe.target
        ));
    }
    let target = Target::parse(recipe.target)?;
    let model = recipe.flow.build(target.dim(), &mut Rng::seeded(0))?;
    let script = crate::run::bijx_script::bijx_script(&model, "flowplay bench")
        .map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("flowplay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (model_path, bench_path) = (dir.join("model.py"), dir.join("bench.py"));
    for (path, text) in [(&model_path, script.as_str()), (&bench_path, BIJX_BENCH)] {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let threads = if bench.threads == 1 { "1" } else { "0" };
    let output = std::process::Command::new(python)
        .arg(&bench_path)
        .args(["--model", &model_path.to_string_lossy()])
        .args(["--target", recipe.target, "--batch", &batch.to_string()])
        .args([
            "--seconds",
            &bench.seconds.to_string(),
            "--threads",
            threads,
        ])
        .output()
        .map_err(|e| format!("could not run {}: {e}", python.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or("");
    let figures: Value = match serde_json::from_str(last) {
        Ok(v) if output.status.success() => v,
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            return Err(format!(
                "{} failed ({}): {}",
                python.display(),
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
    };
    figures["steps_per_second"]
        .as_f64()
        .ok_or_else(|| format!("no steps_per_second in {last}"))
}

/// The centres of an n x n grid over [-4, 4]^2, row-major.
fn grid_points<T: Real>(n: usize) -> Vec<T> {
    (0..n * n)
        .flat_map(|i| {
            let (row, col) = (i / n, i % n);
            let s = |k: usize| T::c(-4.0 + 8.0 * (k as f64 + 0.5) / n as f64);
            [s(col), s(row)]
        })
        .collect()
}

/// log q on an n x n grid over [-4, 4]^2: (evaluations per second, grids per second).
fn grid_rate<T: Real>(flow: &dyn Flow<T>, n: usize, threads: usize, seconds: f64) -> (f64, f64) {
    let points: Vec<T> = grid_points(n);
    let start = Instant::now();
    let mut grids = 0usize;
    while grids == 0 || start.elapsed().as_secs_f64() < seconds {
        let parts = crate::parallel::map_chunks(&points, 2, threads, |chunk| {
            // Blocks of 4096 points keep the coupling conditioner's activations in cache.
            let mut total = 0.0;
            for block in chunk.chunks(2 * 4096) {
                let m = block.len() / 2;
                let mut z = vec![T::zero(); block.len()];
                let mut ld = vec![T::zero(); m];
                flow.z_from_x(block, &mut z, &mut ld);
                total += (0..m)
                    .map(|i| {
                        log_normal(&[z[2 * i].to_f64(), z[2 * i + 1].to_f64()]) + ld[i].to_f64()
                    })
                    .sum::<f64>();
            }
            total
        });
        std::hint::black_box(parts);
        grids += 1;
    }
    let t = start.elapsed().as_secs_f64();
    ((grids * n * n) as f64 / t, grids as f64 / t)
}

/// The adapter the GPU figures come from, named with its graphics API.
#[cfg(feature = "gpu")]
fn gpu_adapter() -> Result<String, String> {
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    Ok(format!("{} ({})", ctx.adapter_name, ctx.backend))
}

#[cfg(not(feature = "gpu"))]
fn gpu_adapter() -> Result<String, String> {
    Err("built without the 'gpu' feature".into())
}

/// The GPU trainer and its compute dispatches per step.
#[cfg(feature = "gpu")]
fn gpu_trainer(
    model: FlowModel<f64>,
    target: Target,
    settings: TrainSettings,
) -> Result<(Box<dyn Trainer>, usize), String> {
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    let trainer = crate::gpu::GpuTrainer::new(ctx, model, target, settings)?;
    let dispatches = trainer.dispatches_per_step();
    Ok((Box::new(trainer), dispatches))
}

#[cfg(not(feature = "gpu"))]
fn gpu_trainer(
    _: FlowModel<f64>,
    _: Target,
    _: TrainSettings,
) -> Result<(Box<dyn Trainer>, usize), String> {
    Err("built without the 'gpu' feature".into())
}

/// log q on the grid with the GPU density kernels: evaluations per second.
#[cfg(feature = "gpu")]
fn gpu_grid_rate(model: &FlowModel<f64>, n: usize, seconds: f64) -> Result<f64, String> {
    let ctx = crate::gpu::GpuContext::new_blocking()?;
    let settings = TrainSettings {
        batch: 1,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let mut kernel = crate::gpu::GpuTrainer::new(ctx, model.clone(), Target::Spiral, settings)?;
    let points: Vec<f32> = grid_points(n);
    kernel.log_q(&points)?; // compiles the pipeline
    let start = Instant::now();
    let mut grids = 0usize;
    while grids == 0 || start.elapsed().as_secs_f64() < seconds {
        std::hint::black_box(kernel.log_q(&points)?);
        grids += 1;
    }
    Ok((grids * n * n) as f64 / start.elapsed().as_secs_f64())
}

#[cfg(not(feature = "gpu"))]
fn gpu_grid_rate(_: &FlowModel<f64>, _: usize, _: f64) -> Result<f64, String> {
    Err("built without the 'gpu' feature".into())
}
