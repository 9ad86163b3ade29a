//! `flowplay export`: a trained model as a runnable script for another library.

use super::read_json;
use crate::run::bijx_script::{CHECK_POINTS, PIP_INSTALL, bijx_script};
use crate::run::model_file::model_from_json;

/// Writes MODEL.json (a model file, a `flowplay train --out` report or the
/// page's export) as a Python script that rebuilds the same flow in bijx
/// 1.3.2, the authors' JAX library, with the trained parameters, and checks
/// its log density at a few embedded points against flowplay's values.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// The model file (JSON), a training report, or the page's export
    #[arg(long, value_name = "MODEL.json")]
    model: String,
    /// What to write: bijx (a Python script for bijx 1.3.2)
    #[arg(long, default_value = "bijx", value_parser = ["bijx"])]
    format: String,
    /// Where to write the script (default: standard output)
    #[arg(long, value_name = "FILE")]
    out: Option<String>,
}

pub fn run(args: ExportArgs) -> Result<(), String> {
    let file = read_json(&args.model, "model file")?;
    // A report or the page's export carries the model under "model".
    let model_json = match (file.get("type"), file.get("model")) {
        (None, Some(inner)) => inner.clone(),
        _ => file.clone(),
    };
    let model = model_from_json(&model_json, None)?;
    let origin = origin(&file, &args.model);
    let script = bijx_script(&model, &origin).map_err(|e| e.to_string())?;
    match &args.out {
        Some(path) => {
            std::fs::write(path, &script).map_err(|e| format!("cannot write '{path}': {e}"))?;
            eprintln!(
                "wrote {path}: {} parameters, checked at {CHECK_POINTS} points; run it with bijx \
                 ({PIP_INSTALL})",
                model.as_flow().params().len()
            );
        }
        None => print!("{script}"),
    }
    Ok(())
}

/// Where the model came from, from what the file says about its training.
fn origin(file: &serde_json::Value, path: &str) -> String {
    let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_string);
    let number = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_u64());
    let page = file.get("playground");
    let target = text(page.and_then(|p| p.get("target"))).or_else(|| text(file.get("target")));
    let steps = number(page.and_then(|p| p.get("step"))).or_else(|| number(file.get("steps")));
    match (target, steps) {
        (Some(t), Some(s)) => format!("trained on {t} for {s} steps, read from {path}"),
        (Some(t), None) => format!("trained on {t}, read from {path}"),
        _ => format!("read from {path}"),
    }
}
