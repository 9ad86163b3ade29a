//! `flowplay phi4 compare`: flow designs side by side at one budget, at a
//! symmetric and a broken point, or at the settings of the authors' library
//! (`--preset bijx`) beside its published figures.

use super::{TrainingArgs, hmc_reference};
use crate::bijection::Family;
use crate::cli::{progress_printer, write_json};
use crate::flow::{Activation, ConvDesign, FlowKind, FlowModel};
use crate::phi4::design::{Design, comparison_designs};
use crate::run::backend::Backend;
use crate::run::limits;
use crate::run::phi4::{check_flow_run, flow_run};
use crate::target::phi4::{Couplings, Phi4};
use crate::train::TrainSettings;
use crate::train::config::{RunPlan, Schedule};
use clap::Args;
use serde_json::json;
use std::time::Instant;

/// The comparison of designs.
#[derive(Args)]
pub(super) struct CompareArgs {
    /// Lattice side L (even)
    #[arg(long, default_value_t = 8)]
    lattice: usize,
    /// The symmetric point's m^2
    #[arg(long, default_value_t = -4.0, allow_hyphen_values = true)]
    m2: f64,
    /// The symmetric point's lambda
    #[arg(long, default_value_t = 8.0)]
    lambda: f64,
    /// The broken point's m^2
    #[arg(long, default_value_t = -4.0, allow_hyphen_values = true)]
    broken_m2: f64,
    /// The broken point's lambda
    #[arg(long, default_value_t = 2.0)]
    broken_lambda: f64,
    /// bijx: reproduce the table of the authors' library, bijx 1.3.2, at its
    /// settings (L = 8, m2 = -4, lambda = 8; 16 coupling layers with a plain
    /// 3 x 3 conditioner 1 -> 8 -> 8 -> out and leaky ReLU; Adam 1e-3, batch 64,
    /// 1000 steps; 8,192 samples) for its five designs, beside bijx's figures.
    /// It sets the lattice, couplings, steps, batch, learning rate and samples
    #[arg(long, value_parser = ["bijx"])]
    preset: Option<String>,
    #[command(flatten)]
    training: TrainingArgs,
}

/// Runs `flowplay phi4 compare`.
pub(super) fn run(args: CompareArgs) -> Result<(), String> {
    if args.preset.is_some() {
        return bijx_preset(&args.training);
    }
    let points = [
        (
            "symmetric",
            Couplings {
                m2: args.m2,
                lambda: args.lambda,
            },
        ),
        (
            "broken",
            Couplings {
                m2: args.broken_m2,
                lambda: args.broken_lambda,
            },
        ),
    ];
    let t = &args.training;
    let settings = t.settings();
    let start = Instant::now();
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    limits::lattice(args.lattice)?;
    for (phase, couplings) in points {
        let model = Phi4::new(args.lattice, couplings)?;
        for design in comparison_designs() {
            check_flow_run(&model, &design, &settings, t.samples)?;
        }
        let reference = hmc_reference(&model, t.trajectories.max(2), settings.seed, t.quiet)?
            .ok_or_else(|| "the comparison needs an HMC reference".to_string())?;
        for design in comparison_designs() {
            let label = format!("{phase} {}: ", design.label());
            let mut progress = progress_printer(label, t.steps, None, t.quiet);
            // the Z2 radial flow's fixed centre is the CPU trainer's alone
            let backend = if design.flow.fixed_centre() {
                Backend::Cpu
            } else {
                t.backend
            };
            let run = flow_run(
                &model,
                &design,
                t.steps,
                settings.clone(),
                t.precision,
                backend,
                t.samples,
                plain_plan(t.schedule, &mut |_, _| {}),
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
            reports.push(super::report::flow_report(
                &model,
                &design,
                &run,
                Some(&reference),
            ));
        }
    }
    println!(
        "L = {}, {} steps of batch {}, lr {}, {} samples each ({:.0} s):\n",
        args.lattice,
        t.steps,
        settings.batch,
        settings.learning_rate,
        t.samples,
        start.elapsed().as_secs_f64()
    );
    println!(
        "| point | flow | ESS/N | IMH acceptance | reverse KL | fraction M > 0 | <M>/V (IMH; exact 0) | <\\|M\\|>/V (IMH) | <\\|M\\|>/V (HMC) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    if let Some(path) = &t.out {
        write_json(path, &json!({ "runs": reports }))?;
    }
    Ok(())
}

/// A plan of the run's steps alone: no time limit, no checkpoints.
fn plain_plan<'a>(
    schedule: Schedule,
    checkpoint: &'a mut dyn FnMut(usize, &FlowModel<f64>),
) -> RunPlan<'a> {
    RunPlan {
        schedule,
        time_limit: None,
        checkpoint_every: 0,
        checkpoint,
    }
}

/// One row of bijx 1.3.2's table: its design and the figures it reached
/// (parameters, ESS/N, IMH acceptance, reverse KL; measured with the pinned
/// library on 8,192 fresh samples, seed 0).
struct BijxRow {
    first: Option<Family>,
    family: Family,
    steps: usize,
    params: usize,
    ess: f64,
    acceptance: f64,
    reverse_kl: f64,
}

/// bijx 1.3.2's table at L = 8, m2 = -4, lambda = 8.
const BIJX_ROWS: [BijxRow; 5] = [
    BijxRow {
        first: None,
        family: Family::Affine,
        steps: 1000,
        params: 12_960,
        ess: 0.026,
        acceptance: 0.18,
        reverse_kl: 2.25,
    },
    BijxRow {
        first: None,
        family: Family::CubicRational,
        steps: 1000,
        params: 14_128,
        ess: 0.181,
        acceptance: 0.39,
        reverse_kl: 0.74,
    },
    BijxRow {
        first: None,
        family: Family::Sinh,
        steps: 1000,
        params: 16_464,
        ess: 0.254,
        acceptance: 0.45,
        reverse_kl: 0.59,
    },
    BijxRow {
        first: Some(Family::Affine),
        family: Family::CubicRational,
        steps: 1000,
        params: 16_464,
        ess: 0.180,
        acceptance: 0.50,
        reverse_kl: 0.48,
    },
    BijxRow {
        first: None,
        family: Family::Affine,
        steps: 2500,
        params: 12_960,
        ess: 0.128,
        acceptance: 0.375,
        reverse_kl: 0.86,
    },
];

/// The design of a bijx row: 16 coupling layers, the plain conditioner
/// 1 -> 8 -> 8 -> out with 3 x 3 kernels and leaky ReLU, and for the affine
/// map alone the tanh-bounded output of the standard real NVP tutorial.
fn bijx_design(row: &BijxRow) -> Design {
    let mut design = Design::new(FlowKind::Lattice, row.family, false)
        .unwrap_or_else(|e| unreachable!("fixed designs are valid: {e}"));
    let f = &mut design.flow;
    f.first = row.first;
    f.layers = 16;
    f.conv = ConvDesign {
        kernel: 3,
        activation: Activation::LeakyRelu,
        channels: Some(vec![8, 8]),
        head_bound: if row.first.is_none() && row.family == Family::Affine {
            1.0
        } else {
            0.0
        },
    };
    design
}

/// `--preset bijx`: bijx's five designs at its settings, each beside bijx's figures.
fn bijx_preset(t: &TrainingArgs) -> Result<(), String> {
    const SAMPLES: usize = 8192;
    let model = Phi4::new(
        8,
        Couplings {
            m2: -4.0,
            lambda: 8.0,
        },
    )?;
    let settings = TrainSettings {
        batch: 64,
        learning_rate: 1e-3,
        ..t.settings()
    };
    let designs: Vec<Design> = BIJX_ROWS.iter().map(bijx_design).collect();
    for design in &designs {
        check_flow_run(&model, design, &settings, SAMPLES)?;
    }
    let start = Instant::now();
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for (row, design) in BIJX_ROWS.iter().zip(&designs) {
        let label = format!("{} ({} steps): ", design.label(), row.steps);
        let mut progress = progress_printer(label, row.steps, None, t.quiet);
        let run = flow_run(
            &model,
            design,
            row.steps,
            settings.clone(),
            t.precision,
            t.backend,
            SAMPLES,
            plain_plan(Schedule::Constant, &mut |_, _| {}),
            &mut progress,
        )?;
        let e = &run.estimates;
        let params = run.outcome.model.as_flow().n_params();
        rows.push(format!(
            "| {} | {} | {params} / {} | **{:.3}** / {:.3} | {:.3} / {:.3} | {:.2} / {:.2} | {:.1} |",
            design.label(),
            row.steps,
            row.params,
            e.ess,
            row.ess,
            e.acceptance,
            row.acceptance,
            e.reverse_kl,
            row.reverse_kl,
            run.outcome.seconds,
        ));
        reports.push(super::report::flow_report(&model, design, &run, None));
    }
    println!(
        "bijx's settings: L = 8, m2 = -4, lambda = 8, 16 layers, conditioner 1 -> 8 -> 8 -> out \
         (3 x 3, leaky ReLU), Adam 1e-3, batch 64, {SAMPLES} samples, seed {} ({:.0} s).\n\
         Each cell: flowplay / bijx 1.3.2.\n",
        settings.seed,
        start.elapsed().as_secs_f64()
    );
    println!(
        "| site map | steps | params | ESS/N | IMH acceptance | reverse KL | flowplay training s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    if let Some(path) = &t.out {
        write_json(path, &json!({ "preset": "bijx", "runs": reports }))?;
    }
    Ok(())
}
