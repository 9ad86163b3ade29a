//! The command-line tool, run as a user runs it.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flowplay"))
}

fn temp(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flowplay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write temp file");
    path
}

/// Runs and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn eval(model: &Value, points: &Value, extra: &[&str]) -> (i32, String, String) {
    let m = temp(&format!("m{}.json", rand_name()), &model.to_string());
    let p = temp(&format!("p{}.json", rand_name()), &points.to_string());
    let mut args = vec![
        "eval",
        "--model",
        m.to_str().unwrap(),
        "--points",
        p.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn rand_name() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn eval_scalar_models_from_the_issue() {
    let model = json!({"type": "scalar", "family": "cubic_rational", "params": {"alpha": 2.0, "beta": 1.0, "c": 0.0}});
    let (code, out, err) = eval(&model, &json!([[1.0], [-50.0]]), &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON output");
    // f(1) = 1 + 2/(1 + 1) = 2; f'(1) = 1 + 2 (1 - 1)/4 = 1
    assert!((v["points"][0][0].as_f64().unwrap() - 2.0).abs() < 1e-12);
    assert!(v["log_det"][0].as_f64().unwrap().abs() < 1e-12);
    // bijx: f(-50) = -50.03998400639744
    assert!((v["points"][1][0].as_f64().unwrap() + 50.03998400639744).abs() < 1e-10);

    for model in [
        json!({"type": "scalar", "family": "sinh", "params": {"s": 2.0, "beta": 0.5, "c": 1.0, "mu": 0.3, "nu": -0.2}}),
        json!({"type": "scalar", "family": "cubic", "params": {"a": 1.0, "b": 0.3, "beta": 1.0, "c": 0.0}}),
        json!({"type": "stack", "layers": [
            {"type": "scalar", "family": "cubic", "params": {"a": 1.0, "b": 0.3, "beta": 1.0, "c": 0.0}},
            {"type": "scalar", "family": "sinh", "params": {"s": 2.0, "beta": 0.5, "c": 1.0, "mu": 0.3, "nu": -0.2}}
        ]}),
    ] {
        let points = json!([[0.5], [-3.0], [12.0]]);
        let (code, out, err) = eval(&model, &points, &[]);
        assert_eq!(code, 0, "{err}");
        let fwd: Value = serde_json::from_str(&out).unwrap();
        let back_pts = temp(
            &format!("back{}.json", rand_name()),
            &fwd["points"].to_string(),
        );
        let m = temp(&format!("mm{}.json", rand_name()), &model.to_string());
        let (code, out, _) = run(&[
            "eval",
            "--model",
            m.to_str().unwrap(),
            "--points",
            back_pts.to_str().unwrap(),
            "--direction",
            "z_from_x",
        ]);
        assert_eq!(code, 0);
        let back: Value = serde_json::from_str(&out).unwrap();
        for i in 0..3 {
            let x = points[i][0].as_f64().unwrap();
            assert!((back["points"][i][0].as_f64().unwrap() - x).abs() < 1e-9);
            let ld = fwd["log_det"][i].as_f64().unwrap() + back["log_det"][i].as_f64().unwrap();
            assert!(ld.abs() < 1e-9, "log-dets of the two directions cancel");
        }
    }
}

#[test]
fn eval_radial_model_matches_bijx_in_both_precisions() {
    let model = json!({"type": "radial", "center": [0.5, -0.25], "log_scale": [0.2, -0.1],
        "bijection": {"type": "scalar", "family": "cubic_rational", "params": {"alpha": 2.0, "beta": 1.0, "c": 0.3}}});
    for precision in ["f64", "f32"] {
        let (code, out, err) = eval(&model, &json!([[1.0, 0.0]]), &["--precision", precision]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let tol = if precision == "f64" { 1e-12 } else { 1e-5 };
        // bijx 1.3.2: y = (1.9027297347852306, 0.4513648673926153), log det 1.90256257847082
        assert!((v["points"][0][0].as_f64().unwrap() - 1.9027297347852306).abs() < tol);
        assert!((v["points"][0][1].as_f64().unwrap() - 0.4513648673926153).abs() < tol);
        assert!((v["log_det"][0].as_f64().unwrap() - 1.90256257847082).abs() < tol);
    }
}

#[test]
fn bad_input_gives_one_line_errors_and_nonzero_exit() {
    let pts = json!([[0.5]]);
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            json!({"type": "scalar", "family": "quartic", "params": {}}),
            pts.clone(),
            "unknown family 'quartic'",
        ),
        (
            json!({"type": "scalar", "family": "cubic_rational", "params": {"alpha": 9.0, "beta": 1.0, "c": 0.0}}),
            pts.clone(),
            "outside its constraint",
        ),
        (
            json!({"type": "scalar", "family": "cubic_rational", "params": {"alpha": 1.0, "c": 0.0}}),
            pts.clone(),
            "needs parameter 'beta'",
        ),
        (
            json!({"type": "scalar", "family": "sinh", "params": {"s": 1.0, "beta": 0.0, "c": 0.0, "mu": 0.0, "nu": 0.0, "gamma": 1.0}}),
            pts.clone(),
            "no parameter 'gamma'",
        ),
        (
            json!({"type": "teapot"}),
            pts.clone(),
            "unknown type 'teapot'",
        ),
        (
            json!({"type": "scalar", "family": "cubic", "params": {"a": 1.0, "b": 0.3, "beta": 1.0, "c": 0.0}}),
            json!([[0.5], ["NaN"]]),
            "points[1][0] is not a number",
        ),
        (
            json!({"type": "scalar", "family": "cubic", "params": {"a": 1.0, "b": 0.3, "beta": 1.0, "c": 0.0}}),
            json!([[0.5, 1.0], [1.0]]),
            "points[1] has 1 coordinates",
        ),
        (
            json!({"type": "radial", "center": [0.0, 0.0], "log_scale": [0.0, 0.0],
                   "bijection": {"type": "scalar", "family": "cubic", "params": {"a": 1.0, "b": 0.3, "beta": 1.0, "c": 0.0}}}),
            json!([[0.5, 1.0, 2.0]]),
            "2-dimensional but the points have 3",
        ),
    ];
    // Sizes a file could ask for that would exhaust memory are refused first.
    let cubic = json!({"type": "scalar", "family": "cubic"});
    let cases: Vec<(Value, Value, &str)> = cases
        .into_iter()
        .chain([
            (
                json!({"type": "radial-fourier", "center": [0, 0], "log_scale": [0, 0], "order": 1_000_000_000_000u64,
                       "bijection": cubic, "weights": [[0], [0], [0], [0]]}),
                json!([[0.5, 1.0]]),
                "'order' must be 1 to 16",
            ),
            (
                json!({"type": "radial-fourier", "center": [0, 0], "log_scale": [0, 0], "order": 3,
                       "bijection": {"type": "stack", "family": "cubic", "copies": 1_000_000_000_000u64}, "weights": []}),
                json!([[0.5, 1.0]]),
                "a stack needs 1 to 1024 layers",
            ),
            (
                json!({"type": "coupling", "dim": 2, "layers": 1, "width": 9_223_372_036_854_775_808u64, "depth": 0,
                       "bijection": cubic, "params": [0, 0, 0, 0]}),
                json!([[0.5, 1.0]]),
                "width 1 to 4096",
            ),
            (
                json!({"type": "elementwise", "dim": 9_223_372_036_854_775_807u64,
                       "bijection": {"type": "scalar", "family": "affine", "params": {"s": 0.0, "t": 0.0}}}),
                json!([]),
                "dimension 1 to 4096",
            ),
            (
                json!({"type": "scalar", "family": "spline", "bins": 8, "bound": 1e308, "raw": vec![0.0; 23]}),
                json!([[0.5]]),
                "a bound in (0, 1000000]",
            ),
        ])
        .collect();
    for (model, points, expected) in cases {
        let (code, out, err) = eval(&model, &points, &[]);
        assert_eq!(code, 1, "{model}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(expected), "expected '{expected}' in: {err}");
        assert!(!err.contains("panicked"));
    }
    // Not JSON at all, and a file that does not exist.
    let bad = temp("bad.json", "{not json");
    let good_pts = temp("pts.json", "[[1.0]]");
    let (code, _, err) = run(&[
        "eval",
        "--model",
        bad.to_str().unwrap(),
        "--points",
        good_pts.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("is not valid JSON"), "{err}");
    let (code, _, err) = run(&[
        "eval",
        "--model",
        "/nonexistent/model.json",
        "--points",
        good_pts.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read model file"), "{err}");
    // Unknown options and values on train: the argument parser's message and
    // exit code 2, like every command's
    let (code, _, err) = run(&["train", "--family", "quartic"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown family"), "{err}");
    let (code, _, err) = run(&["train", "--steps", "many"]);
    assert_eq!(code, 2);
    assert!(err.contains("--steps"), "{err}");
    let (code, _, err) = run(&["train", "--colour", "red"]);
    assert_eq!(code, 2);
    assert!(err.contains("unexpected argument '--colour'"), "{err}");
    let (code, _, err) = run(&["train", "--target", "image:/nonexistent.png"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read image"), "{err}");
    let not_image = temp("fake.png", "this is text");
    let (code, _, err) = run(&[
        "train",
        "--target",
        &format!("image:{}", not_image.display()),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not a PNG or JPEG"), "{err}");
}

#[test]
fn train_writes_a_report_whose_model_eval_reads_and_reruns_are_identical() {
    let dir = std::env::temp_dir().join(format!("flowplay-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut reports = Vec::new();
    for run_no in 0..2 {
        let out = dir.join(format!("run{run_no}.json"));
        let (code, stdout, err) = run(&[
            "train",
            "--target",
            "rings",
            "--flow",
            "radial",
            "--family",
            "cubic_rational",
            "--stack",
            "8",
            "--steps",
            "40",
            "--batch",
            "128",
            "--lr",
            "1e-2",
            "--seed",
            "3",
            "--eval-samples",
            "2000",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(
            stdout.contains("rings radial cubic_rational x8: 40 steps"),
            "{stdout}"
        );
        assert!(err.contains("step      40/40"), "progress on stderr: {err}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        for key in [
            "steps",
            "seconds",
            "steps_per_second",
            "final_loss",
            "test_nll",
            "n_params",
            "model",
        ] {
            assert!(!report[key].is_null(), "report has {key}");
        }
        assert_eq!(report["steps"], 40);
        assert_eq!(report["n_params"], 2 + 2 + 8 * 3);
        reports.push(report);
    }
    // Same command, same numbers.
    assert_eq!(reports[0]["final_loss"], reports[1]["final_loss"]);
    assert_eq!(reports[0]["test_nll"], reports[1]["test_nll"]);
    assert_eq!(reports[0]["model"], reports[1]["model"]);
    // The saved model is what eval reads, alone or as the whole report.
    let points = json!([[0.3, -0.7], [2.0, 1.0]]);
    let (code, out, err) = eval(&reports[0]["model"], &points, &["--direction", "z_from_x"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    let (code, out_report, err) = eval(&reports[0], &points, &["--direction", "z_from_x"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, out_report);
}

#[test]
fn every_flow_and_family_is_reachable_from_the_flags() {
    for (flow, target) in [
        ("radial", "annulus"),
        ("radial-fourier", "spiral"),
        ("coupling", "checkerboard"),
        ("elementwise", "poly1d"),
    ] {
        for family in ["cubic_rational", "sinh", "cubic", "affine", "spline"] {
            let (code, stdout, err) = run(&[
                "train",
                "--target",
                target,
                "--flow",
                flow,
                "--family",
                family,
                "--stack",
                "2",
                "--layers",
                "2",
                "--width",
                "8",
                "--steps",
                "3",
                "--batch",
                "32",
                "--eval-samples",
                "200",
                "--quiet",
            ]);
            assert_eq!(code, 0, "{flow} {family}: {err}");
            assert!(
                stdout.contains(&format!("{target} {flow} {family} x2: 3 steps")),
                "{stdout}"
            );
        }
    }
}

/// `flowplay train --backend gpu` trains coupling flows on the GPU and reports
/// the backend; the model it writes is read by `eval`.
#[cfg(feature = "gpu")]
#[test]
fn train_on_the_gpu_backend_writes_a_model() {
    let dir = std::env::temp_dir().join(format!("flowplay-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("coupling.json");
    let (code, _, err) = run(&[
        "train",
        "--target",
        "moons",
        "--flow",
        "coupling",
        "--layers",
        "2",
        "--width",
        "16",
        "--depth",
        "1",
        "--steps",
        "30",
        "--batch",
        "64",
        "--backend",
        "gpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        report["backend"].as_str().unwrap_or("").starts_with("GPU"),
        "{}",
        report["backend"]
    );
    let points = json!([[0.5, 0.25], [-1.0, 0.3]]);
    let (code, eval_out, err) = eval(&report, &points, &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&eval_out).unwrap();
    assert_eq!(v["points"].as_array().map(Vec::len), Some(2));
}

/// `flowplay bench` prints CPU and GPU figures side by side for every recipe,
/// with the GPU's dispatches per step.
#[cfg(feature = "gpu")]
#[test]
fn bench_prints_cpu_and_gpu_columns() {
    let (code, out, err) = run(&[
        "bench",
        "--seconds",
        "0.05",
        "--batch",
        "16",
        "--grid",
        "8",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON output");
    let training = v["training"].as_array().unwrap();
    // 3 planar and 3 lattice recipes, each on both backends
    assert_eq!(training.len(), 12, "{out}");
    for row in training {
        assert!(row["steps_per_second"].as_f64().unwrap() > 0.0, "{row}");
        if row["backend"] == "gpu" {
            assert!(row["dispatches_per_step"].as_u64().unwrap() >= 3, "{row}");
        }
    }
    assert_eq!(v["density_grid"].as_array().unwrap().len(), 6, "{out}");
}

/// Lattice flows train on the GPU from the command line (`phi4` and `train`),
/// and a misspelt backend is refused.
#[cfg(feature = "gpu")]
#[test]
fn lattice_flows_train_on_the_gpu_backend() {
    let out = temp("phi4-gpu.json", "");
    let (code, _, err) = run(&[
        "phi4",
        "--lattice",
        "4",
        "--m2",
        "-4",
        "--lambda",
        "8",
        "--family",
        "sinh",
        "--layers",
        "2",
        "--steps",
        "20",
        "--batch",
        "16",
        "--samples",
        "200",
        "--trajectories",
        "0",
        "--backend",
        "gpu",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        report["backend"].as_str().unwrap_or("").starts_with("GPU"),
        "{}",
        report["backend"]
    );
    assert_eq!(report["steps"], 20);
    assert!(report["ess"].as_f64().is_some_and(|e| e > 0.0));
    let (code, stdout, err) = run(&[
        "train",
        "--target",
        "phi4:L=4",
        "--flow",
        "lattice",
        "--layers",
        "2",
        "--width",
        "4",
        "--steps",
        "5",
        "--batch",
        "8",
        "--backend",
        "gpu",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("GPU"), "{stdout}");
    let (code, _, err) = run(&["phi4", "--lattice", "4", "--backend", "tpu"]);
    assert_ne!(code, 0);
    assert!(err.contains("--backend must be cpu or gpu"), "{err}");
}

#[test]
fn phi4_hmc_reports_the_reference_observables_in_both_conventions() {
    let out = temp("hmc.json", "");
    let (code, stdout, stderr) = run(&[
        "phi4",
        "hmc",
        "--lattice",
        "4",
        "--kappa",
        "0.3",
        "--lambda-h",
        "0.02",
        "--trajectories",
        "2000",
        "--thermalize",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("<|M|>/V") && stdout.contains("chi"),
        "{stdout}"
    );
    assert!(stderr.contains("hmc: 2200/2200 trajectories"), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let c = &report["couplings"];
    // kappa 0.3, lambda_h 0.02: m^2 = (1 - 0.04) / 0.3 - 4, lambda = 0.02 / 0.09
    assert!((c["m2"].as_f64().unwrap() - (0.96 / 0.3 - 4.0)).abs() < 1e-12);
    assert!((c["lambda"].as_f64().unwrap() - 0.02 / 0.09).abs() < 1e-12);
    assert!((c["kappa"].as_f64().unwrap() - 0.3).abs() < 1e-12);
    assert_eq!(report["two_point"].as_array().unwrap().len(), 16);
    let abs_m = &report["abs_m_per_v"];
    assert!(abs_m["error"].as_f64().unwrap() > 0.0 && abs_m["tau_int"].as_f64().unwrap() >= 0.5);
    let acceptance = report["hmc"]["acceptance"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&acceptance), "{acceptance}");
}

#[test]
fn phi4_refuses_an_unbounded_action_and_mixed_conventions() {
    let (code, _, stderr) = run(&["phi4", "hmc", "--m2", "-1", "--lambda", "0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unbounded below"), "{stderr}");
    let (code, _, stderr) = run(&["phi4", "hmc", "--m2", "1", "--kappa", "0.2"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("one convention"), "{stderr}");
    let (code, _, stderr) = run(&["phi4", "metropolis"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unrecognized subcommand 'metropolis'"),
        "{stderr}"
    );
}

/// Sizes over their limits, and runs over the machine's memory, are refused
/// at once in one line (a lattice of 100,000 once tried to allocate 240 GB,
/// and one of 3,000 ran silently for minutes).
#[test]
fn oversized_runs_are_refused_before_they_start() {
    let refused = |args: &[&str], why: &str| {
        let started = std::time::Instant::now();
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 1, "{args:?}: {stdout} {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        // (a guard against a run that started anyway, not a speed test)
        assert!(started.elapsed().as_secs() < 60, "{args:?} ran");
    };
    let lattice = "the lattice side L 100000 is over the limit of 64";
    refused(&["phi4", "--lattice", "100000"], lattice);
    refused(&["phi4", "hmc", "--lattice", "100000"], lattice);
    refused(
        &["phi4", "compare", "--lattice", "3000"],
        "L 3000 is over the limit",
    );
    refused(
        &["phi4", "hmc", "--trajectories", "5000000"],
        "HMC trajectories 5000000 is over the limit of 1000000",
    );
    refused(
        &["train", "--batch", "100000000"],
        "the batch 100000000 is over the limit of 65536",
    );
    refused(
        &["train", "--target", "phi4:L=100", "--flow", "lattice"],
        "the lattice side L 100 is over the limit of 64",
    );
    // within every limit, but terabytes of activations
    refused(
        &[
            "phi4",
            "--lattice",
            "64",
            "--batch",
            "65536",
            "--width",
            "64",
            "--trajectories",
            "0",
        ],
        "of memory and the machine has",
    );
}

/// `flowplay export`: a training report (or its bare model) becomes a bijx
/// script naming where it came from; stdout without --out; bad input is one
/// line and exit 1 (tests/bijx_export.rs runs such scripts against bijx).
#[test]
fn export_writes_a_bijx_script_of_a_trained_model() {
    let dir = std::env::temp_dir().join(format!("flowplay-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let (code, _, err) = run(&[
        "train",
        "--target",
        "rings",
        "--flow",
        "radial",
        "--family",
        "sinh",
        "--stack",
        "4",
        "--steps",
        "20",
        "--batch",
        "64",
        "--eval-samples",
        "500",
        "--quiet",
        "--out",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let script = dir.join("rings.py");
    let (code, stdout, err) = run(&[
        "export",
        "--model",
        report.to_str().unwrap(),
        "--format",
        "bijx",
        "--out",
        script.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(err.contains("24 parameters, checked at 12 points"), "{err}");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        text.contains("A radial flow in 2D, 4 sinh maps on every ray"),
        "{text}"
    );
    assert!(text.contains("trained on rings for 20 steps"), "{text}");
    // The bare model to stdout: the same script but for where it was read from.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let bare = temp("bare-model.json", &v["model"].to_string());
    let (code, stdout, err) = run(&["export", "--model", bare.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let strip = |t: &str| t.lines().skip(5).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&stdout), strip(&text));

    let spline = dir.join("spline.json");
    let (code, _, err) = run(&[
        "train",
        "--flow",
        "radial",
        "--family",
        "spline",
        "--stack",
        "2",
        "--steps",
        "2",
        "--eval-samples",
        "100",
        "--quiet",
        "--out",
        spline.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&["export", "--model", spline.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("flowplay export: error: the spline family has no counterpart in bijx"),
        "{err}"
    );
    let (code, _, err) = run(&["export", "--model", "/nonexistent.json"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read model file '/nonexistent.json'"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "export",
        "--model",
        bare.to_str().unwrap(),
        "--format",
        "onnx",
    ]);
    assert_eq!(code, 2, "{err}");
}

/// Every command and subcommand answers --help and -h with its options, and
/// the tool its version; no command needs a value to show its help.
#[test]
fn every_command_has_help_and_the_tool_a_version() {
    let commands: [&[&str]; 8] = [
        &[],
        &["eval"],
        &["export"],
        &["train"],
        &["bench"],
        &["phi4"],
        &["phi4", "compare"],
        &["phi4", "hmc"],
    ];
    for command in commands {
        for flag in ["--help", "-h"] {
            let mut args = command.to_vec();
            args.push(flag);
            let (code, out, err) = run(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            assert!(out.contains("Usage: flowplay"), "{args:?}: {out}");
        }
    }
    let (_, out, _) = run(&["phi4", "--help"]);
    assert!(out.contains("--lattice") && out.contains("--z2"), "{out}");
    let (_, out, _) = run(&["help", "train"]);
    assert!(out.contains("--target"), "{out}");
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("flowplay "), "{out}");
}

/// Flows on the phi^4 lattice field, trained by reverse KL from the action
/// alone: a site-wise stack and a radial flow on the whole field vector.
#[test]
fn flows_train_on_the_phi4_field_by_reverse_kl() {
    for flow in ["elementwise", "radial"] {
        let out = temp(&format!("phi4-{flow}.json"), "");
        let (code, _, stderr) = run(&[
            "train",
            "--target",
            "phi4:L=4,m2=-4,lambda=8",
            "--flow",
            flow,
            "--family",
            "sinh",
            "--stack",
            "2",
            "--steps",
            "300",
            "--batch",
            "128",
            "--lr",
            "0.01",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{flow}: {stderr}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let history: Vec<f64> = report["loss_history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(
            mean(&history[history.len() - 30..]) < mean(&history[..30]) - 1.0,
            "{flow}: the reverse KL did not fall: {} -> {}",
            mean(&history[..30]),
            mean(&history[history.len() - 30..])
        );
        let ess = report["ess"].as_f64().unwrap();
        assert!(ess > 0.0 && ess <= 1.0, "{flow}: ESS/N {ess}");
        assert!(report["acceptance"].as_f64().is_some());
    }
    let (code, _, stderr) = run(&["train", "--target", "phi4:L=4,m2=-1,lambda=0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unbounded below"), "{stderr}");
}

/// A lattice coupling flow trained on a small lattice, its samples corrected by
/// independent Metropolis-Hastings and by importance weights: both estimates
/// of <|M|>/V, <M^2>/V and G_c(0) agree with HMC's within their error bars.
#[test]
fn corrected_flow_estimates_agree_with_hmc_on_a_small_lattice() {
    let out = temp("phi4-coupling.json", "");
    let (code, stdout, stderr) = run(&[
        "phi4",
        "--lattice",
        "4",
        "--m2",
        "-4",
        "--lambda",
        "8",
        "--flow",
        "coupling",
        "--family",
        "sinh",
        "--steps",
        "400",
        "--samples",
        "20000",
        "--trajectories",
        "20000",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ESS/N"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ess = report["ess"].as_f64().unwrap();
    let acceptance = report["acceptance"].as_f64().unwrap();
    assert!(ess > 0.05 && ess <= 1.0, "ESS/N {ess}");
    assert!(
        acceptance > 0.1 && acceptance < 1.0,
        "acceptance {acceptance}"
    );
    for method in ["imh", "reweighted"] {
        for observable in ["abs_m_per_v", "m2_per_v", "g0"] {
            let pull = report["pulls"][method][observable].as_f64().unwrap();
            assert!(
                pull.abs() < 4.0,
                "{method} {observable}: {pull} combined errors from HMC: {}",
                report[method]
            );
        }
    }
    assert_eq!(report["model"]["type"], "lattice");
    assert_eq!(report["imh"]["two_point"].as_array().unwrap().len(), 16);
}

/// At a broken-phase point the Z2-equivariant coupling flow puts exactly half
/// its samples at M > 0 (within binomial noise), trained or not.
#[test]
fn the_z2_flow_samples_both_modes_in_the_broken_phase() {
    let out = temp("phi4-z2.json", "");
    let samples: f64 = 10_000.0;
    let (code, _, stderr) = run(&[
        "phi4",
        "--lattice",
        "4",
        "--m2",
        "-4",
        "--lambda",
        "2",
        "--z2",
        "--family",
        "cubic_rational",
        "--steps",
        "150",
        "--samples",
        "10000",
        "--trajectories",
        "0",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let fraction = report["positive_fraction"].as_f64().unwrap();
    assert!(
        (fraction - 0.5).abs() < 4.0 * (0.25 / samples).sqrt(),
        "fraction with M > 0: {fraction}"
    );
    assert_eq!(report["z2"], true);
    assert!(report.get("hmc").is_none());
    // the saved model is the Z2 flow: eval maps -phi to minus the image of phi
    let phi: Vec<f64> = (0..16).map(|k| ((k * 7 % 5) as f64 - 2.0) * 0.4).collect();
    let minus: Vec<f64> = phi.iter().map(|v| -v).collect();
    let (code, out, err) = eval(&report["model"], &json!([phi, minus]), &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    for k in 0..16 {
        let (a, b) = (
            v["points"][0][k].as_f64().unwrap(),
            v["points"][1][k].as_f64().unwrap(),
        );
        assert!((a + b).abs() < 1e-12, "site {k}: {a} and {b}");
    }
    let (a, b) = (
        v["log_det"][0].as_f64().unwrap(),
        v["log_det"][1].as_f64().unwrap(),
    );
    assert!(
        (a - b).abs() < 1e-12 && a.is_finite(),
        "log-dets {a} and {b}"
    );
    // the options are checked
    let (code, _, stderr) = run(&["phi4", "--flow", "elementwise", "--z2"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--z2 applies to"), "{stderr}");
    let (code, _, stderr) = run(&["phi4", "--lattice", "5", "--steps", "1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("even side"), "{stderr}");
}

/// A radial flow starts at the origin with unit scales unless told otherwise
/// (the spiral recipe at (-0.5, -1)), whatever the seed.
#[test]
fn radial_flows_start_at_the_origin() {
    for (target, centre) in [("rings", [0.0, 0.0]), ("spiral", [-0.5, -1.0])] {
        let out =
            std::env::temp_dir().join(format!("flowplay-start-{target}-{}.json", rand_name()));
        let out_path = out.to_str().unwrap();
        let (code, _, err) = run(&[
            "train",
            "--target",
            target,
            "--flow",
            "radial",
            "--stack",
            "2",
            "--steps",
            "0",
            "--seed",
            "3",
            "--eval-samples",
            "10",
            "--out",
            out_path,
            "--quiet",
        ]);
        assert_eq!(code, 0, "{err}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(report["model"]["center"], json!(centre), "{target}");
        assert_eq!(report["model"]["log_scale"], json!([0.0, 0.0]), "{target}");
    }
}
