//! The phi^4 lab's architecture knobs from the command line: conditioner
//! designs, composite site maps, the learning-rate schedule, a time limit and
//! checkpoints; and what happens when they are given wrong.

use flowplay::bijection::Family;
use flowplay::flow::{Activation, ConvDesign, Flow, FlowConfig, FlowKind, FlowModel};
use flowplay::rng::Rng;
use flowplay::run::model_file::{model_from_json, model_to_json};
use flowplay::train::config::Schedule;
use serde_json::Value;
use std::process::Command;

/// Runs the tool and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flowplay"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("flowplay-phi4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn a_long_run_stops_at_its_time_limit_and_leaves_a_checkpoint() {
    let dir = temp_dir();
    let checkpoint = dir.join("ckpt.json");
    let ckpt = checkpoint.to_str().expect("utf-8 path");
    // a run of a million steps, limited to 3 seconds
    let (code, stdout, stderr) = run(&[
        "phi4",
        "--lattice",
        "4",
        "--family",
        "affine+sinh",
        "--channels",
        "4,4",
        "--kernel",
        "3",
        "--activation",
        "leaky_relu",
        "--head-bound",
        "3",
        "--layers",
        "2",
        "--batch",
        "16",
        "--steps",
        "1000000",
        "--minutes",
        "0.05",
        "--schedule",
        "cosine",
        "--checkpoint",
        ckpt,
        "--checkpoint-every",
        "20",
        "--samples",
        "256",
        "--trajectories",
        "0",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("coupling affine+sinh"), "{stdout}");
    // progress lines carry the estimate of the time left, bounded by the limit
    let eta: Vec<f64> = stderr
        .lines()
        .filter_map(|l| l.split("eta").nth(1))
        .filter_map(|t| t.trim().trim_end_matches(" s").trim().parse().ok())
        .collect();
    assert!(!eta.is_empty(), "{stderr}");
    assert!(eta.iter().all(|&t| t <= 3.0 + 1e-9), "{eta:?}");
    // stopped by the clock, far short of its steps
    let steps: usize = stdout
        .split(" steps in ")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the summary line names its steps");
    assert!(steps > 0 && steps < 1_000_000, "{stdout}");

    // the checkpoint is the final model, with its step, and the tool reads it
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&checkpoint).expect("checkpoint written"))
            .expect("JSON");
    assert_eq!(saved["step"].as_u64(), Some(steps as u64));
    assert_eq!(saved["model"]["conv"]["activation"], "leaky_relu");
    assert_eq!(
        saved["model"]["conv"]["channels"],
        serde_json::json!([4, 4])
    );
    let model = model_from_json(&saved["model"], Some(16)).expect("a lattice model");
    let FlowModel::Lattice(flow) = &model else {
        panic!("not a lattice flow")
    };
    assert_eq!(flow.spec.stack.layers(), [Family::Affine, Family::Sinh]);
    let points = dir.join("points.json");
    std::fs::write(&points, format!("[{:?}]", vec![0.1; 16])).expect("write points");
    let (code, out, err) = run(&[
        "eval",
        "--model",
        ckpt,
        "--points",
        points.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("log_det"), "{out}");
}

#[test]
fn conditioner_designs_survive_the_model_file() {
    let mut flow = FlowConfig::defaults(FlowKind::Lattice);
    flow.family = Family::CubicRational;
    flow.first = Some(Family::Affine);
    flow.conv = ConvDesign {
        kernel: 5,
        activation: Activation::Tanh,
        channels: Some(vec![6, 3]),
        head_bound: 2.5,
    };
    let model: FlowModel<f64> = flow.build(36, &mut Rng::seeded(3)).expect("valid");
    let json = model_to_json(&model);
    let back = model_from_json(&json, Some(36)).expect("reads back");
    let (FlowModel::Lattice(a), FlowModel::Lattice(b)) = (&model, &back) else {
        panic!("lattice flows")
    };
    assert_eq!(a.spec, b.spec);
    assert_eq!(a.params(), b.params());
    // a model file from before the designs existed is the residual default
    let mut old = json.clone();
    old.as_object_mut().expect("object").remove("conv");
    let err = model_from_json(&old, Some(36)).expect_err("params of another shape");
    assert!(err.to_string().contains("param"), "{err}");
    // and a wrong design is refused with the reason
    let mut bad = json;
    bad["conv"]["activation"] = "relu".into();
    let err = model_from_json(&bad, Some(36)).expect_err("unknown activation");
    assert!(
        err.to_string().contains("unknown activation 'relu'"),
        "{err}"
    );
}

#[test]
fn the_cosine_schedule_falls_from_the_rate_to_one_percent() {
    let f = |d| Schedule::Cosine.factor(d);
    assert_eq!(f(0.0), 1.0);
    assert!((f(0.5) - 0.505).abs() < 1e-12);
    assert!((f(1.0) - 0.01).abs() < 1e-12);
    assert!((f(7.0) - 0.01).abs() < 1e-12, "clamped past the end");
    assert_eq!(Schedule::Constant.factor(0.9), 1.0);
    assert!(Schedule::parse("linear").is_err());
}

#[test]
fn wrong_designs_are_refused_with_one_line() {
    let refused = |args: &[&str], why: &str| {
        let mut all = vec!["phi4", "--trajectories", "0", "--steps", "1"];
        all.extend_from_slice(args);
        let (code, stdout, stderr) = run(&all);
        assert_ne!(code, 0, "{args:?}: {stdout}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    };
    let shape = "an odd kernel side of 1 to 7";
    refused(&["--kernel", "4"], shape);
    refused(&["--kernel", "9"], shape);
    refused(&["--channels", "8,0"], "channels");
    refused(&["--head-bound", "-1"], "head bound of 0 to 100");
    refused(&["--activation", "relu"], "unknown activation 'relu'");
    refused(&["--family", "affine+nope"], "nope");
    refused(&["--minutes", "0"], "--minutes must be more than 0");
    refused(&["--schedule", "linear"], "constant or cosine");
}
