//! Models in and out of the page, in the CLI's JSON format: an export is a
//! report like `flowplay train --out` writes (its "model" is what `flowplay
//! eval` reads), with the page's settings beside it; an import takes either.

use super::settings::Settings;
use crate::flow::{FlowKind, FlowModel, RadialConditioner};
use crate::run::model_file::{model_from_json, model_to_json};
use serde_json::{Value, json};

/// The export file of `model` at `step`, trained with `settings`.
pub fn export(model: &FlowModel<f64>, step: usize, settings: &Settings) -> Vec<u8> {
    let report = json!({
        "model": model_to_json(model),
        "playground": {
            "settings": settings.to_query(),
            "target": settings.target.label(),
            "step": step,
        },
    });
    serde_json::to_vec_pretty(&report).unwrap_or_default()
}

/// What an imported file gives: the settings to show and the model to start
/// from, and what of the file's settings was ignored.
pub struct Imported {
    pub settings: Settings,
    pub model: FlowModel<f64>,
    /// the steps it was trained for (an export's "step", a report's "steps")
    pub step: usize,
    pub ignored: Vec<String>,
}

/// Reads a model file (an export, a `flowplay train` report, or a bare
/// model). The settings start from `current`, take the file's page settings
/// where it has them, and always the model's own structure.
pub fn import(bytes: &[u8], current: &Settings) -> Result<Imported, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let model_json = match (v.get("type"), v.get("model")) {
        (None, Some(inner)) => inner,
        _ => &v,
    };
    if let Some(kind @ ("elementwise" | "scalar" | "stack")) =
        model_json.get("type").and_then(Value::as_str)
    {
        return Err(format!(
            "this is a {kind} model (element-wise); the page shows radial and coupling flows"
        ));
    }
    let model = model_from_json(model_json, Some(2))?;
    let (mut settings, ignored) = match v
        .get("playground")
        .and_then(|p| p.get("settings"))
        .and_then(Value::as_str)
    {
        Some(query) => Settings::from_query(query),
        None => (current.clone(), Vec::new()),
    };
    match &model {
        FlowModel::Radial(f) => {
            if f.spec.dim != 2 {
                return Err(format!(
                    "the page shows 2D flows; this one is {}D",
                    f.spec.dim
                ));
            }
            settings.flow = match f.spec.conditioner {
                RadialConditioner::Direct => FlowKind::Radial,
                RadialConditioner::Fourier { .. } => FlowKind::RadialFourier,
            };
            settings.stack = f.spec.stack.len();
            settings.family = f.spec.stack.layers()[0];
        }
        FlowModel::Coupling(f) => {
            if f.spec.dim != 2 {
                return Err(format!(
                    "the page shows 2D flows; this one is {}D",
                    f.spec.dim
                ));
            }
            settings.flow = FlowKind::Coupling;
            settings.layers = f.spec.layers;
            settings.width = f.spec.width;
            settings.stack = f.spec.stack.len();
            settings.family = f.spec.stack.layers()[0];
        }
        FlowModel::Elementwise(_) | FlowModel::Lattice(_) => {
            return Err(
                "this is an element-wise or lattice model; the page's 2D views show radial and coupling flows".into(),
            );
        }
    }
    // an export's playground step, or a CLI report's steps
    let step = v
        .get("playground")
        .and_then(|p| p.get("step"))
        .or_else(|| v.get("steps"))
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    Ok(Imported {
        settings,
        model,
        step,
        ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::playground::settings::TargetChoice;
    use crate::bijection::Family;
    use crate::flow::Flow;
    use crate::rng::Rng;

    #[test]
    fn an_exported_model_imports_as_the_same_model_and_settings() {
        for flow in [FlowKind::RadialFourier, FlowKind::Coupling] {
            let settings = Settings {
                target: TargetChoice::Preset("moons"),
                flow,
                family: Family::Sinh,
                stack: 3,
                layers: 2,
                width: 8,
                seed: 5,
                ..Settings::default()
            };
            let mut rng = Rng::seeded(2);
            let mut model = settings.flow_config().build(2, &mut rng).unwrap();
            // trained-looking parameters, not the initial ones
            match &mut model {
                FlowModel::Radial(f) => f.params_mut().iter_mut().for_each(|v| *v += 0.1),
                FlowModel::Coupling(f) => f.params_mut().iter_mut().for_each(|v| *v += 0.01),
                FlowModel::Elementwise(_) | FlowModel::Lattice(_) => unreachable!(),
            }
            let bytes = export(&model, 120, &settings);
            let imported = import(&bytes, &Settings::default()).unwrap();
            assert_eq!(imported.settings, settings);
            assert_eq!(imported.step, 120);
            assert!(imported.ignored.is_empty());
            assert_eq!(
                imported.model.as_flow().params(),
                model.as_flow().params(),
                "{flow:?}"
            );
        }
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let current = Settings::default();
        let err = |bytes: &[u8]| import(bytes, &current).err().unwrap();
        assert!(err(b"\x89PNG").contains("not JSON"));
        assert!(err(br#"{"type": "radial"}"#).contains("missing"));
        assert!(
            err(br#"{"type": "elementwise", "dim": 2, "bijection": {"type": "scalar", "family": "affine"}}"#)
                .contains("element-wise")
        );
    }
}
