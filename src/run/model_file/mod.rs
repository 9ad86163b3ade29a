//! The JSON model format, read by `flowplay eval` and written by `flowplay train`
//! (and the app's export). Parameters are named as in docs/mathematics.md; saved models also
//! carry their raw values, which take precedence on reading so a reload is exact.
//!
//! ```json
//! {"type": "scalar", "family": "cubic_rational", "params": {"alpha": 2.0, "beta": 1.0, "c": 0.0}}
//! {"type": "stack", "layers": [ ...scalar models... ]}
//! {"type": "radial", "center": [0.5, -0.25], "log_scale": [0.2, -0.1], "bijection": { ...scalar or stack... }}
//! {"type": "radial-fourier", "center": [..], "log_scale": [..], "order": 3,
//!  "bijection": {"type": "stack", "family": "cubic", "copies": 64}, "weights": [[..7..], ...]}
//! {"type": "coupling", "dim": 2, "layers": 8, "width": 128, "depth": 2,
//!  "bijection": {"type": "scalar", "family": "cubic"}, "params": [...]}
//! {"type": "elementwise", "dim": 1, "bijection": { ...scalar or stack... }}
//! ```

mod conv;

use crate::bijection::BijectionError;
use crate::bijection::stack::MAX_STACK;
use crate::bijection::{Family, Scalar, SplineShape, Stack};
use crate::flow::FlowError;
use crate::flow::radial::MAX_ORDER;
use crate::flow::{
    ConvDesign, CouplingFlow, CouplingSpec, ElementwiseFlow, Flow, FlowModel, LatticeFlow,
    LatticeSpec, RadialConditioner, RadialFlow, RadialSpec,
};
use serde_json::{Map, Value, json};

/// Why a JSON value is not a model: what of it is wrong, for the person who
/// wrote or edited the file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModelFileError {
    #[error("{what} is missing field '{key}'")]
    Missing { what: String, key: String },
    #[error("{what} must be {expected}")]
    Expected {
        what: String,
        expected: &'static str,
    },
    #[error("{what}: family '{family}' needs parameter '{param}'")]
    MissingParam {
        what: String,
        family: &'static str,
        param: &'static str,
    },
    #[error("{0} is not finite")]
    NotFinite(String),
    /// A value of the right type that describes no model (a count out of
    /// range, an unknown type, shapes that do not fit together).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error(transparent)]
    Bijection(#[from] BijectionError),
}

/// The message, where errors meet a person (the command line, the page).
impl From<ModelFileError> for String {
    fn from(e: ModelFileError) -> String {
        e.to_string()
    }
}

type Result<T> = std::result::Result<T, ModelFileError>;

fn field<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Value> {
    v.get(key).ok_or_else(|| ModelFileError::Missing {
        what: what.to_string(),
        key: key.to_string(),
    })
}

fn number(v: &Value, what: &str) -> Result<f64> {
    let x = v.as_f64().ok_or_else(|| ModelFileError::Expected {
        what: what.to_string(),
        expected: "a number",
    })?;
    if !x.is_finite() {
        return Err(ModelFileError::NotFinite(what.to_string()));
    }
    Ok(x)
}

fn numbers(v: &Value, what: &str) -> Result<Vec<f64>> {
    let arr = v.as_array().ok_or_else(|| ModelFileError::Expected {
        what: what.to_string(),
        expected: "an array of numbers",
    })?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| number(x, &format!("{what}[{i}]")))
        .collect()
}

fn count(v: &Value, key: &str, what: &str) -> Result<usize> {
    let x = field(v, key, what)?;
    x.as_u64()
        .map(|n| n as usize)
        .ok_or_else(|| ModelFileError::Expected {
            what: format!("{what}: '{key}'"),
            expected: "a non-negative integer",
        })
}

fn family_of(v: &Value, what: &str) -> Result<Family> {
    let name = field(v, "family", what)?
        .as_str()
        .ok_or_else(|| ModelFileError::Expected {
            what: format!("{what}: 'family'"),
            expected: "a string",
        })?;
    let family = Family::parse(name)?;
    if let Family::Spline(_) = family {
        let bins = match v.get("bins") {
            Some(b) => b.as_u64().ok_or_else(|| ModelFileError::Expected {
                what: format!("{what}: 'bins'"),
                expected: "an integer",
            })? as usize,
            None => SplineShape::default().bins,
        };
        let bound = match v.get("bound") {
            Some(b) => number(b, &format!("{what}: 'bound'"))?,
            None => SplineShape::default().bound,
        };
        let shape = SplineShape { bins, bound };
        shape
            .validate()
            .map_err(|e| ModelFileError::Invalid(format!("{what}: {e}")))?;
        return Ok(Family::Spline(shape));
    }
    Ok(family)
}

/// The layers of a scalar or stack description, with raw parameters when
/// `with_params` (a template without parameters otherwise).
fn parse_stack(v: &Value, with_params: bool, what: &str) -> Result<(Stack, Vec<f64>)> {
    let kind = field(v, "type", what)?.as_str().unwrap_or("");
    match kind {
        "scalar" => {
            let family = family_of(v, what)?;
            let raw = if with_params {
                parse_scalar_raw(v, family, what)?
            } else {
                Vec::new()
            };
            Ok((Stack::uniform(family, 1), raw))
        }
        "stack" => {
            if let Some(copies) = v.get("copies") {
                if with_params {
                    return Err(ModelFileError::Invalid(format!(
                        "{what}: a stack given by 'copies' has no parameters; list its 'layers'"
                    )));
                }
                let n = copies.as_u64().ok_or_else(|| ModelFileError::Expected {
                    what: format!("{what}: 'copies'"),
                    expected: "an integer",
                })?;
                if !(1..=MAX_STACK as u64).contains(&n) {
                    return Err(ModelFileError::Invalid(format!(
                        "{what}: a stack needs 1 to {MAX_STACK} layers"
                    )));
                }
                let n = n as usize;
                return Ok((Stack::uniform(family_of(v, what)?, n), Vec::new()));
            }
            let layers =
                field(v, "layers", what)?
                    .as_array()
                    .ok_or_else(|| ModelFileError::Expected {
                        what: format!("{what}: 'layers'"),
                        expected: "an array",
                    })?;
            if layers.is_empty() || layers.len() > MAX_STACK {
                return Err(ModelFileError::Invalid(format!(
                    "{what}: a stack needs 1 to {MAX_STACK} layers"
                )));
            }
            let mut families = Vec::new();
            let mut raw = Vec::new();
            for (i, layer) in layers.iter().enumerate() {
                let (s, r) = parse_stack(layer, with_params, &format!("{what} layer {i}"))?;
                families.extend_from_slice(s.layers());
                raw.extend(r);
            }
            Ok((Stack::mixed(families), raw))
        }
        other => Err(ModelFileError::Invalid(format!(
            "{what}: expected type 'scalar' or 'stack', got '{other}'"
        ))),
    }
}

fn parse_scalar_raw(v: &Value, family: Family, what: &str) -> Result<Vec<f64>> {
    if let Some(raw) = v.get("raw") {
        let raw = numbers(raw, &format!("{what}: 'raw'"))?;
        if raw.len() != family.n_raw() {
            return Err(ModelFileError::Invalid(format!(
                "{what}: family '{}' has {} raw parameters, got {}",
                family.name(),
                family.n_raw(),
                raw.len()
            )));
        }
        return Ok(raw);
    }
    if let Family::Spline(_) = family {
        return Err(ModelFileError::Invalid(format!(
            "{what}: a spline is given by its 'raw' parameters"
        )));
    }
    let params = field(v, "params", what)?
        .as_object()
        .ok_or_else(|| ModelFileError::Expected {
            what: format!("{what}: 'params'"),
            expected: "an object",
        })?;
    for key in params.keys() {
        if !family.params().iter().any(|p| p.name == key) {
            let names: Vec<&str> = family.params().iter().map(|p| p.name).collect();
            return Err(ModelFileError::Invalid(format!(
                "{what}: family '{}' has no parameter '{key}' (its parameters: {})",
                family.name(),
                names.join(", ")
            )));
        }
    }
    let mut values = Vec::new();
    for spec in family.params() {
        let x = params
            .get(spec.name)
            .ok_or_else(|| ModelFileError::MissingParam {
                what: what.to_string(),
                family: family.name(),
                param: spec.name,
            })?;
        values.push(number(x, &format!("{what}: parameter '{}'", spec.name))?);
    }
    Ok(family.raw_from_constrained(&values)?)
}

/// Reads a model. `dim` is the data dimension, used by scalar and stack models
/// (applied to every coordinate).
pub fn model_from_json(v: &Value, dim: Option<usize>) -> Result<FlowModel<f64>> {
    let what = "model";
    let kind = field(v, "type", what)?
        .as_str()
        .ok_or_else(|| ModelFileError::Expected {
            what: "model: 'type'".into(),
            expected: "a string",
        })?;
    match kind {
        "scalar" | "stack" => {
            let (stack, raw) = parse_stack(v, true, what)?;
            Ok(FlowModel::Elementwise(ElementwiseFlow::from_params(
                dim.unwrap_or(1),
                stack,
                raw,
            )?))
        }
        "elementwise" => {
            let d = count(v, "dim", what)?;
            let (stack, raw) = parse_stack(field(v, "bijection", what)?, true, "model bijection")?;
            Ok(FlowModel::Elementwise(ElementwiseFlow::from_params(
                d, stack, raw,
            )?))
        }
        "radial" | "radial-fourier" => radial_from_json(v, kind == "radial-fourier"),
        "coupling" => {
            let (stack, _) = parse_stack(field(v, "bijection", what)?, false, "model bijection")?;
            let spec = CouplingSpec {
                dim: count(v, "dim", what)?,
                layers: count(v, "layers", what)?,
                width: count(v, "width", what)?,
                depth: count(v, "depth", what)?,
                stack,
            };
            let params = numbers(field(v, "params", what)?, "model: 'params'")?;
            Ok(FlowModel::Coupling(CouplingFlow::from_params(
                spec, params,
            )?))
        }
        "lattice" => {
            let (stack, _) = parse_stack(field(v, "bijection", what)?, false, "model bijection")?;
            let z2 = match v.get("z2") {
                None => false,
                Some(flag) => flag.as_bool().ok_or_else(|| ModelFileError::Expected {
                    what: "model: 'z2'".into(),
                    expected: "true or false",
                })?,
            };
            let spec = LatticeSpec {
                size: count(v, "size", what)?,
                layers: count(v, "layers", what)?,
                width: count(v, "width", what)?,
                depth: count(v, "depth", what)?,
                stack,
                z2,
                conv: match v.get("conv") {
                    None => ConvDesign::default(),
                    Some(c) => conv::parse_conv(c)?,
                },
            };
            let params = numbers(field(v, "params", what)?, "model: 'params'")?;
            Ok(FlowModel::Lattice(LatticeFlow::from_params(spec, params)?))
        }
        other => Err(ModelFileError::Invalid(format!(
            "model: unknown type '{other}' (expected scalar, stack, elementwise, radial, radial-fourier, coupling or lattice)"
        ))),
    }
}

/// A radial flow: its centre, log-scales and stack, with the stack's raw
/// values (direct) or the Fourier conditioner's weights (`fourier`).
fn radial_from_json(v: &Value, fourier: bool) -> Result<FlowModel<f64>> {
    let what = "model";
    let center = numbers(field(v, "center", what)?, "model: 'center'")?;
    let log_scale = numbers(field(v, "log_scale", what)?, "model: 'log_scale'")?;
    if center.len() != log_scale.len() || center.is_empty() {
        return Err(ModelFileError::Invalid(
            "model: 'center' and 'log_scale' must have the same, non-zero length".into(),
        ));
    }
    let (stack, raw) = parse_stack(field(v, "bijection", what)?, !fourier, "model bijection")?;
    let mut params = center.clone();
    params.extend(log_scale);
    let conditioner = if fourier {
        let (order, w) = fourier_weights(v, stack.n_raw())?;
        params.extend(w);
        RadialConditioner::Fourier { order }
    } else {
        params.extend(raw);
        RadialConditioner::Direct
    };
    let spec = RadialSpec {
        dim: center.len(),
        stack,
        conditioner,
    };
    Ok(FlowModel::Radial(RadialFlow::from_params(spec, params)?))
}

/// The Fourier conditioner's order and weights (one row per raw value of a
/// stack of `n_raw`), stored feature-major as the flow keeps them.
fn fourier_weights(v: &Value, n_raw: usize) -> Result<(usize, Vec<f64>)> {
    let what = "model";
    let order = count(v, "order", what)?;
    if !(1..=MAX_ORDER).contains(&order) {
        return Err(ModelFileError::Invalid(format!(
            "model: 'order' must be 1 to {MAX_ORDER}"
        )));
    }
    let rows = field(v, "weights", what)?
        .as_array()
        .ok_or_else(|| ModelFileError::Expected {
            what: "model: 'weights'".into(),
            expected: "an array of rows",
        })?;
    if rows.len() != n_raw {
        return Err(ModelFileError::Invalid(format!(
            "model: 'weights' needs one row per raw parameter of the stack ({}), got {}",
            n_raw,
            rows.len()
        )));
    }
    let nf = 2 * order + 1;
    let mut w = vec![0.0; rows.len() * nf];
    for (i, row) in rows.iter().enumerate() {
        let r = numbers(row, &format!("model: 'weights'[{i}]"))?;
        if r.len() != nf {
            return Err(ModelFileError::Invalid(format!(
                "model: 'weights'[{i}] needs {nf} entries (2 order + 1)"
            )));
        }
        // stored feature-major (see flow::radial)
        for (f, v) in r.into_iter().enumerate() {
            w[f * rows.len() + i] = v;
        }
    }
    Ok((order, w))
}

fn scalar_json(family: Family, raw: &[f64]) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), json!("scalar"));
    obj.insert("family".into(), json!(family.name()));
    let layer = Scalar::<f64>::from_raw(family, raw);
    match (&layer, family) {
        (Scalar::Spline(s), Family::Spline(shape)) => {
            obj.insert("bins".into(), json!(shape.bins));
            obj.insert("bound".into(), json!(shape.bound));
            let (x, y, d) = s.knots();
            obj.insert("knots".into(), json!({"x": x, "y": y, "slopes": d}));
        }
        _ => {
            let mut params = Map::new();
            for (spec, value) in family.params().iter().zip(layer.constrained()) {
                params.insert(spec.name.into(), json!(value));
            }
            obj.insert("params".into(), Value::Object(params));
        }
    }
    obj.insert("raw".into(), json!(raw));
    Value::Object(obj)
}

fn stack_json(stack: &Stack, raw: &[f64]) -> Value {
    let layers: Vec<Value> = (0..stack.len())
        .map(|k| scalar_json(stack.layers()[k], &raw[stack.layer_range(k)]))
        .collect();
    if layers.len() == 1 {
        layers.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({"type": "stack", "layers": layers})
    }
}

/// A parameter-free description of a stack's structure.
fn template_json(stack: &Stack) -> Value {
    let first = stack.layers()[0];
    let family_json = |f: Family| -> Value {
        match f {
            Family::Spline(shape) => {
                json!({"type": "scalar", "family": "spline", "bins": shape.bins, "bound": shape.bound})
            }
            _ => json!({"type": "scalar", "family": f.name()}),
        }
    };
    if stack.len() == 1 {
        return family_json(first);
    }
    if stack.layers().iter().all(|&f| f == first) {
        let mut v = family_json(first);
        v["type"] = json!("stack");
        v["copies"] = json!(stack.len());
        return v;
    }
    json!({"type": "stack", "layers": stack.layers().iter().map(|&f| family_json(f)).collect::<Vec<_>>()})
}

/// Writes a model in the format [`model_from_json`] reads.
pub fn model_to_json(model: &FlowModel<f64>) -> Value {
    match model {
        FlowModel::Elementwise(f) => json!({
            "type": "elementwise",
            "dim": f.dim,
            "bijection": stack_json(&f.stack, f.params()),
        }),
        FlowModel::Radial(f) => {
            let d = f.spec.dim;
            let p = f.params();
            let (center, log_scale, body) = (&p[..d], &p[d..2 * d], &p[2 * d..]);
            match f.spec.conditioner {
                RadialConditioner::Direct => json!({
                    "type": "radial",
                    "center": center,
                    "log_scale": log_scale,
                    "bijection": stack_json(&f.spec.stack, body),
                }),
                RadialConditioner::Fourier { order } => {
                    let nf = 2 * order + 1;
                    let n_raw = f.spec.stack.n_raw();
                    // one row per raw parameter (the body is stored feature-major)
                    let rows: Vec<Vec<f64>> = (0..n_raw)
                        .map(|q| (0..nf).map(|k| body[k * n_raw + q]).collect())
                        .collect();
                    json!({
                        "type": "radial-fourier",
                        "center": center,
                        "log_scale": log_scale,
                        "order": order,
                        "bijection": template_json(&f.spec.stack),
                        "weights": rows,
                    })
                }
            }
        }
        FlowModel::Coupling(f) => json!({
            "type": "coupling",
            "dim": f.spec.dim,
            "layers": f.spec.layers,
            "width": f.spec.width,
            "depth": f.spec.depth,
            "bijection": template_json(&f.spec.stack),
            "params": f.params(),
        }),
        FlowModel::Lattice(f) => json!({
            "type": "lattice",
            "size": f.spec.size,
            "layers": f.spec.layers,
            "width": f.spec.width,
            "depth": f.spec.depth,
            "z2": f.spec.z2,
            "conv": conv::conv_json(&f.spec.conv),
            "bijection": template_json(&f.spec.stack),
            "params": f.params(),
        }),
    }
}
