//! `flowplay bench`: throughput of the reference recipes, for comparing releases.

use super::Args;
use crate::flow::{Flow, FlowConfig, FlowKind, FlowModel};
use crate::real::Real;
use crate::rng::Rng;
use crate::target::Target;
use crate::train::metrics::log_normal;
use crate::train::{CpuTrainer, Loss, TrainSettings, Trainer, default_threads};
use serde_json::{Value, json};
use std::time::Instant;

pub const HELP: &str = "\
flowplay bench [--seconds 2] [--batch 512,8192] [--backend cpu] [--threads N] [--grid 512] [--json]

Prints training steps per second for the reference recipes (direct radial and
angle-dependent radial flows on the spiral, 64 x cubic; coupling flow 8 x 128 on
moons) at each batch size, and density evaluations per second on a grid.
Each figure runs for about --seconds after two warm-up steps.";

/// One reference recipe.
struct Recipe {
    name: &'static str,
    target: &'static str,
    flow: FlowConfig,
}

fn recipes() -> Vec<Recipe> {
    let mut radial = FlowConfig::defaults(FlowKind::Radial);
    radial.center = Some(vec![-0.5, -1.0]);
    radial.log_scale = Some(vec![0.0, 0.0]);
    let mut fourier = FlowConfig::defaults(FlowKind::RadialFourier);
    fourier.center = Some(vec![-0.5, -1.0]);
    fourier.log_scale = Some(vec![0.0, 0.0]);
    vec![
        Recipe {
            name: "radial, spiral, 64 x cubic",
            target: "spiral",
            flow: radial,
        },
        Recipe {
            name: "radial-fourier, spiral, 64 x cubic",
            target: "spiral",
            flow: fourier,
        },
        Recipe {
            name: "coupling 8 x 128, moons, cubic",
            target: "moons",
            flow: FlowConfig::defaults(FlowKind::Coupling),
        },
    ]
}

pub fn run(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(
        argv,
        &["seconds", "batch", "backend", "threads", "grid"],
        &["json"],
    )?;
    let seconds: f64 = args.get("seconds", 2.0)?;
    let threads: usize = args.get("threads", default_threads())?.max(1);
    let grid: usize = args.get("grid", 512)?.max(2);
    let batches: Vec<usize> = args
        .str("batch")
        .unwrap_or("512,8192")
        .split(',')
        .map(|b| {
            b.trim()
                .parse::<usize>()
                .map_err(|_| format!("--batch: cannot read '{b}' as a batch size"))
        })
        .collect::<Result<_, _>>()?;
    match args.str("backend").unwrap_or("cpu") {
        "cpu" => {}
        "gpu" | "all" => {
            return Err("the GPU backend is not part of this build yet; use --backend cpu".into());
        }
        other => return Err(format!("--backend must be cpu, gpu or all, got '{other}'")),
    }
    let json_out = args.flag("json");
    let mut rows = Vec::new();
    if !json_out {
        println!("flowplay bench: CPU backend, {threads} threads, f32");
        println!("{:<40} {:>7} {:>12}", "training recipe", "batch", "steps/s");
    }
    for recipe in recipes() {
        for &batch in &batches {
            let rate = train_rate(&recipe, batch, threads, seconds)?;
            if !json_out {
                println!("{:<40} {:>7} {:>12.1}", recipe.name, batch, rate);
            }
            rows.push(json!({"recipe": recipe.name, "backend": "cpu", "batch": batch, "steps_per_second": rate}));
        }
    }
    let mut rng = Rng::seeded(1);
    let mut grid_rows = Vec::new();
    for recipe in recipes() {
        let model: FlowModel<f32> = recipe.flow.build(2, &mut rng)?;
        let (evals, per_grid) = grid_rate(model.as_flow(), grid, threads, seconds);
        if !json_out {
            if grid_rows.is_empty() {
                println!(
                    "{:<40} {:>7} {:>12}",
                    "density on a grid", "grid", "evals/s"
                );
            }
            println!(
                "{:<40} {:>7} {:>12.0}   ({per_grid:.1} grids/s)",
                recipe.name,
                format!("{grid}^2"),
                evals
            );
        }
        grid_rows.push(json!({"recipe": recipe.name, "backend": "cpu", "grid": grid, "evals_per_second": evals, "grids_per_second": per_grid}));
    }
    if json_out {
        let out: Value = json!({"threads": threads, "training": rows, "density_grid": grid_rows});
        println!("{out}");
    }
    Ok(())
}

fn train_rate(recipe: &Recipe, batch: usize, threads: usize, seconds: f64) -> Result<f64, String> {
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
    let mut trainer = CpuTrainer::<f32>::new(model, target, settings)?;
    for _ in 0..2 {
        trainer.step().map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    let mut steps = 0usize;
    while start.elapsed().as_secs_f64() < seconds {
        trainer.step().map_err(|e| e.to_string())?;
        steps += 1;
    }
    Ok(steps as f64 / start.elapsed().as_secs_f64())
}

/// log q on an n x n grid over [-4, 4]^2: (evaluations per second, grids per second).
fn grid_rate<T: Real>(flow: &dyn Flow<T>, n: usize, threads: usize, seconds: f64) -> (f64, f64) {
    let points: Vec<T> = (0..n * n)
        .flat_map(|i| {
            let (row, col) = (i / n, i % n);
            let s = |k: usize| T::c(-4.0 + 8.0 * (k as f64 + 0.5) / n as f64);
            [s(col), s(row)]
        })
        .collect();
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
