//! `flowplay eval`: a model applied to points, with log-dets, as JSON.

use super::{Args, read_json};
use crate::flow::FlowModel;
use crate::real::Real;
use crate::run::model_file::model_from_json;
use serde_json::{Value, json};

pub const HELP: &str = "\
flowplay eval --model MODEL.json --points POINTS.json [--direction x_from_z|z_from_x] [--precision f64|f32]

Applies the model to every point and prints {\"points\": [[...], ...], \"log_det\": [...]},
where log_det is log|det d(output)/d(input)| in the chosen direction.
  --direction  x_from_z (sampling, the map f itself; default) or z_from_x (density)
  --precision  f64 (default, the reference) or f32 (what the GPU computes)
A scalar or stack model is applied to every coordinate of a point. MODEL.json may
also be a report written by `flowplay train --out` (its \"model\" is used).";

pub fn run(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, &["model", "points", "direction", "precision"], &[])?;
    let model_json = read_json(args.required("model")?, "model file")?;
    let points_json = read_json(args.required("points")?, "points file")?;
    let points = parse_points(&points_json)?;
    let dim = points.first().map(|p| p.len()).unwrap_or(1);
    // A training report carries its model under "model".
    let model_json = match (model_json.get("type"), model_json.get("model")) {
        (None, Some(inner)) => inner.clone(),
        _ => model_json,
    };
    let model = model_from_json(&model_json, Some(dim))?;
    let sampling = match args.str("direction").unwrap_or("x_from_z") {
        "x_from_z" => true,
        "z_from_x" => false,
        other => {
            return Err(format!(
                "--direction must be x_from_z or z_from_x, got '{other}'"
            ));
        }
    };
    let output = match args.str("precision").unwrap_or("f64") {
        "f64" => evaluate::<f64>(&model, &points, sampling)?,
        "f32" => evaluate::<f32>(&model.cast(), &points, sampling)?,
        other => return Err(format!("--precision must be f64 or f32, got '{other}'")),
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
