//! The way out to bijx: every flow kind exported as a Python script, and each
//! script run against bijx 1.3.2 itself, which must rebuild the same flow (its
//! log density at the embedded points within float32 rounding of ours).
//!
//! The round trip needs Python with the pinned bijx, jax and flax: the test
//! command installs them (scripts/tools.sh, `ensure_bijx_venv`) and names the
//! interpreter in `BIJX_PYTHON`. Under CI that variable must be set; a
//! developer's plain `cargo test` without it runs everything else and says so.

use flowplay::bijection::{Family, SplineShape};
use flowplay::flow::{Activation, ConvDesign, FlowConfig, FlowKind, FlowModel};
use flowplay::rng::Rng;
use flowplay::run::bijx_script::{ExportError, PIP_INSTALL, bijx_script};
use std::path::PathBuf;
use std::process::Command;

/// One design of the table: a name, its flow, and the data dimension.
struct Design {
    name: &'static str,
    config: FlowConfig,
    dim: usize,
}

fn design(
    name: &'static str,
    kind: FlowKind,
    dim: usize,
    edit: impl Fn(&mut FlowConfig),
) -> Design {
    let mut config = FlowConfig::defaults(kind);
    edit(&mut config);
    Design { name, config, dim }
}

/// Every flow kind, every analytic family and the affine one, stacks of
/// one map and of several (bijx's ScanChain), composite site maps, odd data
/// dimensions, and the lattice conditioner's variants.
fn designs() -> Vec<Design> {
    use FlowKind::*;
    vec![
        design("radial_cubic_64", Radial, 2, |_| {}),
        design("radial_sinh_3d", Radial, 3, |c| {
            c.family = Family::Sinh;
            c.stack = 4;
        }),
        design("radial_affine_then_cubic_rational", Radial, 2, |c| {
            c.first = Some(Family::Affine);
            c.family = Family::CubicRational;
            c.stack = 3;
        }),
        design("radial_fourier_cubic_64", RadialFourier, 2, |_| {}),
        design("radial_fourier_sinh_order_2", RadialFourier, 2, |c| {
            c.family = Family::Sinh;
            c.stack = 2;
            c.fourier_order = 2;
        }),
        design("coupling_cubic_rational", Coupling, 2, |c| {
            c.family = Family::CubicRational;
            c.layers = 4;
            c.width = 16;
        }),
        design("coupling_cubic_stack_3_in_3d", Coupling, 3, |c| {
            c.stack = 3;
            c.layers = 3;
            c.width = 8;
            c.depth = 1;
        }),
        design("coupling_affine_then_sinh_depth_0", Coupling, 2, |c| {
            c.first = Some(Family::Affine);
            c.family = Family::Sinh;
            c.layers = 2;
            c.width = 8;
            c.depth = 0;
        }),
        design("elementwise_cubic_8", Elementwise, 1, |c| c.stack = 8),
        design("elementwise_affine_then_sinh_2d", Elementwise, 2, |c| {
            c.first = Some(Family::Affine);
            c.family = Family::Sinh;
            c.stack = 2;
        }),
        design("lattice_default", Lattice, 16, |c| c.layers = 4),
        design("lattice_z2_sinh_plain_leaky_head", Lattice, 16, |c| {
            c.family = Family::Sinh;
            c.layers = 2;
            c.z2 = true;
            c.conv = ConvDesign {
                kernel: 3,
                activation: Activation::LeakyRelu,
                channels: Some(vec![4, 4]),
                head_bound: 5.0,
            };
        }),
        design(
            "lattice_z2_affine_then_cubic_rational_tanh_k5",
            Lattice,
            36,
            |c| {
                c.first = Some(Family::Affine);
                c.family = Family::CubicRational;
                c.layers = 2;
                c.width = 4;
                c.depth = 2;
                c.z2 = true;
                c.conv = ConvDesign {
                    kernel: 5,
                    activation: Activation::Tanh,
                    channels: None,
                    head_bound: 0.0,
                };
            },
        ),
    ]
}

/// The design built and every parameter moved off its initial value, so
/// that each one (and any mix-up of their order) shows in the density.
fn perturbed(design: &Design, seed: u64) -> FlowModel<f64> {
    let mut rng = Rng::seeded(seed);
    let mut model = design
        .config
        .build::<f64>(design.dim, &mut rng)
        .unwrap_or_else(|e| panic!("{}: {e}", design.name));
    for p in model.as_flow_mut().params_mut() {
        *p += 0.2 * rng.normal();
    }
    model
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flowplay-bijx-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn every_design_exports_a_script_that_bijx_rebuilds_exactly() {
    let python = match std::env::var("BIJX_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must run the bijx round trip: the test command sets BIJX_PYTHON"
            );
            eprintln!(
                "BIJX_PYTHON is not set: the exported scripts were not run against bijx \
                 (scripts/test.sh installs {PIP_INSTALL} and sets it)"
            );
            return;
        }
    };
    let dir = scratch_dir();
    let mut failures = Vec::new();
    for (k, design) in designs().iter().enumerate() {
        let model = perturbed(design, 100 + k as u64);
        let script = bijx_script(&model, &format!("the test design {}", design.name))
            .unwrap_or_else(|e| panic!("{}: {e}", design.name));
        let path = dir.join(format!("{}.py", design.name));
        std::fs::write(&path, script).expect("write script");
        let out = Command::new(&python)
            .arg(&path)
            .output()
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let verdict = stdout.lines().last().unwrap_or("(no output)").to_string();
        println!("{:<48} {verdict}", design.name);
        if !out.status.success() {
            failures.push(format!(
                "{}: exit {:?}\n{stdout}\n{}",
                design.name,
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "bijx disagreed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_script_carries_the_model_and_its_check() {
    let designs = designs();
    let model = perturbed(&designs[3], 7);
    let script = bijx_script(&model, "trained on spiral for 300 steps").expect("exports");
    assert!(script.starts_with("\"\"\"A flowplay model rebuilt in bijx 1.3.2"));
    assert!(script.contains("angle-dependent radial flow (Fourier order 3), 64 cubic maps"));
    assert!(script.contains("1796 parameters"));
    assert!(script.contains("trained on spiral for 300 steps"));
    assert!(script.contains(PIP_INSTALL));
    assert!(script.contains("STACK = [(\"cubic\", 64)]"));
    assert!(script.contains("bijx.RadialConditional("));
    assert!(script.contains("sys.exit(0 if check(model) else 1)"));
    // Another model gives another script: the parameters are in it.
    let other = perturbed(&designs[3], 8);
    assert_ne!(bijx_script(&other, "x").ok(), bijx_script(&model, "x").ok());
}

#[test]
fn a_diverged_model_is_refused_with_the_reason() {
    let designs = designs();
    let mut model = perturbed(&designs[0], 1);
    model.as_flow_mut().params_mut()[5] = f64::NAN;
    let err = bijx_script(&model, "x").expect_err("refused");
    assert_eq!(
        err,
        ExportError::NonFiniteParameter {
            index: 5,
            count: 260
        }
    );
    assert!(err.to_string().contains("diverged"));
    assert!(err.to_string().contains("restore its last good state"));
}

#[test]
fn a_model_whose_density_overflows_is_refused() {
    // Finite parameters, but a sinh map whose outer stretch e^mu overflows,
    // so log q of its own samples is not finite.
    let mut config = FlowConfig::defaults(FlowKind::Elementwise);
    config.family = Family::Sinh;
    config.stack = 1;
    let mut model = config.build::<f64>(1, &mut Rng::seeded(0)).expect("builds");
    // raw order (s, beta, c, mu, nu); mu = asinh(raw)
    model.as_flow_mut().params_mut()[3] = 1e308;
    let err = bijx_script(&model, "x").expect_err("refused");
    assert_eq!(err, ExportError::NonFiniteDensity);
}

#[test]
fn the_spline_is_refused_with_the_reason() {
    let mut config = FlowConfig::defaults(FlowKind::Radial);
    config.family = Family::Spline(SplineShape::default());
    config.stack = 2;
    let model = config.build::<f64>(2, &mut Rng::seeded(0)).expect("builds");
    let err = bijx_script(&model, "x").expect_err("refused");
    assert_eq!(err, ExportError::Spline);
    assert!(
        err.to_string()
            .contains("cubic_rational, sinh, cubic and affine")
    );
}

#[test]
fn the_test_command_installs_the_versions_the_scripts_name() {
    let tools = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/tools.sh"))
        .expect("scripts/tools.sh");
    assert!(
        tools.contains(&format!("BIJX_PACKAGES=\"{PIP_INSTALL}\"")),
        "scripts/tools.sh must install {PIP_INSTALL}"
    );
}
