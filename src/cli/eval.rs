//! `flowplay eval`: a model applied to points, with log-dets, as JSON.

use super::read_json;
use crate::flow::FlowModel;
use crate::real::Real;
use crate::run::model_file::model_from_json;
use serde_json::{Value, json};

/// Applies the model to every point and prints {"points": [[...], ...],
/// "log_det": [...]}, where log_det is log|det d(output)/d(input)| in the chosen
/// direction. A scalar or stack model is applied to every coordinate of a
/// point. MODEL.json may also be a report written by `flowplay train --out`
/// (its "model" is used).
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The model file (JSON), or a training report
    #[arg(long, value_name = "MODEL.json")]
    model: String,
    /// The points: a JSON array of points, like [[0.5, 1.0], [2.0, -1.0]]
    #[arg(long, value_name = "POINTS.json")]
    points: String,
    /// x_from_z (sampling, the map f itself) or z_from_x (density)
    #[arg(long, default_value = "x_from_z", value_parser = ["x_from_z", "z_from_x"])]
    direction: String,
    /// f64 (the reference) or f32 (what the GPU computes)
    #[arg(long, default_value = "f64", value_parser = ["f64", "f32"])]
    precision: String,
}

pub fn run(args: EvalArgs) -> Result<(), String> {
    let model_json = read_json(&args.model, "model file")?;
    let points_json = read_json(&args.points, "points file")?;
    let points = parse_points(&points_json)?;
    let dim = points.first().map(|p| p.len()).unwrap_or(1);
    // A training report carries its model under "model".
    let model_json = match (model_json.get("type"), model_json.get("model")) {
        (None, Some(inner)) => inner.clone(),
        _ => model_json,
    };
    let model = model_from_json(&model_json, Some(dim))?;
    let sampling = args.direction == "x_from_z";
    let output = if args.precision == "f32" {
        evaluate::<f32>(&model.cast(), &points, sampling)?
    } else {
        evaluate::<f64>(&model, &points, sampling)?
    };
    println!("{output}");
    Ok(())
}

/// Points as `[[x1, ...], ...]`, all of one dimension, all finite.
pub fn parse_points(v: &Value) -> Result<Vec<Vec<f64>>, String> {
    let rows = v.as_array().ok_or_else(|| {
        "points must be an array of points, like [[0.5, 1.0], [2.0, -1.0]]".to_string()
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let coords = row
            .as_array()
            .ok_or_else(|| format!("points[{i}] must be an array of numbers"))?;
        let mut p = Vec::with_capacity(coords.len());
        for (j, c) in coords.iter().enumerate() {
            let x = c.as_f64().ok_or_else(|| {
                format!("points[{i}][{j}] is not a number (NaN and infinities are not allowed)")
            })?;
            if !x.is_finite() {
                return Err(format!("points[{i}][{j}] is not finite"));
            }
            p.push(x);
        }
        if p.is_empty() {
            return Err(format!("points[{i}] is empty"));
        }
        if let Some(first) = out.first().map(|q: &Vec<f64>| q.len())
            && first != p.len()
        {
            return Err(format!(
                "points[{i}] has {} coordinates, points[0] has {first}",
                p.len()
            ));
        }
        out.push(p);
    }
    Ok(out)
}

fn evaluate<T: Real>(
    model: &FlowModel<T>,
    points: &[Vec<f64>],
    sampling: bool,
) -> Result<Value, String> {
    let flow = model.as_flow();
    let d = flow.dim();
    if let Some(p) = points.first()
        && p.len() != d
    {
        return Err(format!(
            "the model is {d}-dimensional but the points have {} coordinates",
            p.len()
        ));
    }
    let input: Vec<T> = points.iter().flatten().map(|&v| T::c(v)).collect();
    let mut out = vec![T::zero(); input.len()];
    let mut ld = vec![T::zero(); points.len()];
    if sampling {
        flow.x_from_z(&input, &mut out, &mut ld);
    } else {
        flow.z_from_x(&input, &mut out, &mut ld);
    }
    let non_finite = out.iter().chain(&ld).filter(|v| !v.is_finite()).count();
    if non_finite > 0 {
        eprintln!(
            "flowplay eval: warning: {non_finite} output values are not finite; they are written as null"
        );
    }
    let rows: Vec<Vec<f64>> = out
        .chunks(d)
        .map(|r| r.iter().map(|v| v.to_f64()).collect())
        .collect();
    let ld: Vec<f64> = ld.iter().map(|v| v.to_f64()).collect();
    Ok(json!({"points": rows, "log_det": ld}))
}
