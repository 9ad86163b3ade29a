//! A trained model as a runnable Python script for bijx 1.3.2, the authors'
//! JAX library (`flowplay export --format bijx`, the page's "Export as Python
//! (bijx)"): the way out of the browser when a design outgrows it.
//!
//! The script rebuilds the same flow from bijx's own modules (its scalar
//! bijections, `ScanChain`, `Radial`, `RadialConditional`,
//! `GeneralCouplingLayer`, its ResNet, flax convolutions), loads the trained
//! raw parameters (embedded exactly, as base64 of float64 bytes), and checks
//! `log q` at a few embedded points against the values computed here, exiting
//! 1 on any disagreement beyond float32 rounding. The Python lives beside this
//! file (`bijx_script/*.py`): a shared part that maps flowplay's families and
//! parameter layout onto bijx's, one part per flow kind, and the check.

use crate::bijection::Family;
use crate::flow::{Flow, FlowModel, RadialConditioner};
use crate::rng::Rng;
use crate::train::metrics::log_q;
use std::fmt::Write;

/// What the script needs installed, pinned (the test command installs the same).
pub const PIP_INSTALL: &str = "bijx==1.3.2 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8";

/// Points at which the script checks `log q`.
pub const CHECK_POINTS: usize = 12;

/// The largest difference of `log q` the script accepts, relative to
/// `max(1, |log q|)`: float32 rounding through a deep flow, far above what
/// two float64 evaluations of the same flow differ by (about 1e-12).
pub const TOLERANCE: f64 = 1e-5;

const IMPORTS: &str = include_str!("bijx_script/imports.py");
const PREAMBLE: &str = include_str!("bijx_script/preamble.py");
const RADIAL: &str = include_str!("bijx_script/radial.py");
const RADIAL_FOURIER: &str = include_str!("bijx_script/radial_fourier.py");
const COUPLING: &str = include_str!("bijx_script/coupling.py");
const ELEMENTWISE: &str = include_str!("bijx_script/elementwise.py");
const LATTICE: &str = include_str!("bijx_script/lattice.py");
const CHECK: &str = include_str!("bijx_script/check.py");

/// Why a model cannot be exported as a bijx script.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExportError {
    #[error(
        "the model has diverged (parameter {index} of {count} is not finite); restore its last good state or train it again before exporting"
    )]
    NonFiniteParameter { index: usize, count: usize },
    #[error(
        "the model's log density is not finite at one of its own samples: it has diverged; restore its last good state or train it again before exporting"
    )]
    NonFiniteDensity,
    #[error(
        "the spline family has no counterpart in bijx with the same parameters (bijx's spline lives on [0, 1]); models of cubic_rational, sinh, cubic and affine maps export"
    )]
    Spline,
}

/// The script for `model`; `origin` says where it came from (one line, e.g.
/// "trained in the playground on the spiral for 1200 steps").
pub fn bijx_script(model: &FlowModel<f64>, origin: &str) -> Result<String, ExportError> {
    let flow = model.as_flow();
    let params = flow.params();
    if let Some(index) = params.iter().position(|v| !v.is_finite()) {
        return Err(ExportError::NonFiniteParameter {
            index,
            count: params.len(),
        });
    }
    let stack = match model {
        FlowModel::Radial(f) => &f.spec.stack,
        FlowModel::Coupling(f) => &f.spec.stack,
        FlowModel::Elementwise(f) => &f.stack,
        FlowModel::Lattice(f) => &f.spec.stack,
    };
    if stack
        .layers()
        .iter()
        .any(|f| matches!(f, Family::Spline(_)))
    {
        return Err(ExportError::Spline);
    }
    let (points, log_q_values) = check_points(flow);
    if log_q_values.iter().any(|v| !v.is_finite()) {
        return Err(ExportError::NonFiniteDensity);
    }

    let mut constants = String::new();
    let dim = flow.dim();
    let mut constant = |name: &str, value: String| {
        let _ = writeln!(constants, "{name} = {value}");
    };
    constant("DIM", dim.to_string());
    constant("STACK", groups_literal(stack.layers()));
    let (kind_code, event_shape) = match model {
        FlowModel::Radial(f) => match f.spec.conditioner {
            RadialConditioner::Direct => (RADIAL, format!("({dim},)")),
            RadialConditioner::Fourier { order } => {
                constant("ORDER", order.to_string());
                (RADIAL_FOURIER, format!("({dim},)"))
            }
        },
        FlowModel::Coupling(f) => {
            constant("LAYERS", f.spec.layers.to_string());
            constant("WIDTH", f.spec.width.to_string());
            constant("DEPTH", f.spec.depth.to_string());
            (COUPLING, format!("({dim},)"))
        }
        FlowModel::Elementwise(_) => (ELEMENTWISE, format!("({dim},)")),
        FlowModel::Lattice(f) => {
            let s = &f.spec;
            constant("SIZE", s.size.to_string());
            constant("LAYERS", s.layers.to_string());
            constant("WIDTH", s.width.to_string());
            constant("DEPTH", s.depth.to_string());
            constant("KERNEL", s.conv.kernel.to_string());
            constant("ACTIVATION", format!("\"{}\"", s.conv.activation.name()));
            let channels = s.conv.channels.as_ref().map_or("None".to_string(), |c| {
                let list: Vec<String> = c.iter().map(|v| v.to_string()).collect();
                format!("[{}]", list.join(", "))
            });
            constant("CHANNELS", channels);
            constant("HEAD_BOUND", py_float(s.conv.head_bound));
            let odd = match (s.z2, s.stack.odd_raw()) {
                (true, Some(mask)) => {
                    let list: Vec<&str> = mask
                        .iter()
                        .map(|&o| if o { "True" } else { "False" })
                        .collect();
                    format!("[{}]", list.join(", "))
                }
                _ => "None".to_string(),
            };
            constant("ODD_RAW", odd);
            (LATTICE, format!("({0}, {0})", s.size))
        }
    };
    constant("EVENT_SHAPE", event_shape);
    constant("PARAMS", py_array(params));
    constant("CHECK_POINTS", py_array(&points));
    constant("CHECK_LOG_Q", py_array(&log_q_values));
    constant("TOLERANCE", format!("{TOLERANCE:e}"));

    let mut script = header(model, origin);
    script.push_str(IMPORTS);
    script.push_str(
        "\n# ----------------------------------------------------------------------------\n\
         # The model as flowplay stores it: its structure, its raw (unconstrained)\n\
         # parameters in flowplay's order, and log q at points flowplay computed.\n\
         # ----------------------------------------------------------------------------\n\n",
    );
    script.push_str(&constants);
    for part in [PREAMBLE, kind_code, CHECK] {
        script.push_str("\n\n");
        script.push_str(part);
    }
    Ok(script)
}

/// The module docstring: what the script is and how to run it.
fn header(model: &FlowModel<f64>, origin: &str) -> String {
    let flow = model.as_flow();
    format!(
        r#""""A flowplay model rebuilt in bijx 1.3.2, the authors' JAX library.

{what}, {count} parameters;
{origin}. Written by flowplay {version}.

The script builds the same flow from bijx's own modules, loads the trained
parameters embedded below, and checks log q at {points} points against the values
flowplay computed (exit status 1 if any differs beyond float32 rounding).
Afterwards `build_model()` gives an ordinary bijx distribution, with
`.sample((n,), rng=key)` and `.log_density(x)`, to train further (optax) or to
grow into a larger model.

    python -m venv .venv-bijx
    .venv-bijx/bin/pip install {pip}
    .venv-bijx/bin/python this_script.py
"""

"#,
        what = describe(model),
        count = flow.params().len(),
        version = env!("CARGO_PKG_VERSION"),
        points = CHECK_POINTS,
        pip = PIP_INSTALL,
    )
}

/// One line naming the flow and its maps.
fn describe(model: &FlowModel<f64>) -> String {
    match model {
        FlowModel::Radial(f) => {
            let maps = maps(f.spec.stack.layers());
            match f.spec.conditioner {
                RadialConditioner::Direct => {
                    format!("A radial flow in {}D, {maps} on every ray", f.spec.dim)
                }
                RadialConditioner::Fourier { order } => format!(
                    "An angle-dependent radial flow (Fourier order {order}), {maps} on each ray"
                ),
            }
        }
        FlowModel::Coupling(f) => format!(
            "A coupling flow in {}D: {} layers, ResNet conditioners of width {} and depth {}, {} a coordinate",
            f.spec.dim,
            f.spec.layers,
            f.spec.width,
            f.spec.depth,
            maps(f.spec.stack.layers())
        ),
        FlowModel::Elementwise(f) => format!(
            "An element-wise flow in {}D, {} on every coordinate",
            f.dim,
            maps(f.stack.layers())
        ),
        FlowModel::Lattice(f) => format!(
            "A{z2} lattice flow on the {size} x {size} field: {layers} layers, {maps} a site",
            z2 = if f.spec.z2 { " Z2-equivariant" } else { "" },
            size = f.spec.size,
            layers = f.spec.layers,
            maps = maps(f.spec.stack.layers())
        ),
    }
}

/// "64 cubic maps", "affine then 1 cubic_rational map".
fn maps(layers: &[Family]) -> String {
    let parts: Vec<String> = groups(layers)
        .iter()
        .map(|(family, copies)| {
            let plural = if *copies == 1 { "map" } else { "maps" };
            format!("{copies} {} {plural}", family.name())
        })
        .collect();
    parts.join(" then ")
}

/// Runs of one family: `[(family, copies), ...]` in the sampling order.
fn groups(layers: &[Family]) -> Vec<(Family, usize)> {
    let mut out: Vec<(Family, usize)> = Vec::new();
    for &family in layers {
        match out.last_mut() {
            Some((last, copies)) if *last == family => *copies += 1,
            _ => out.push((family, 1)),
        }
    }
    out
}

fn groups_literal(layers: &[Family]) -> String {
    let parts: Vec<String> = groups(layers)
        .iter()
        .map(|(family, copies)| format!("(\"{}\", {copies})", family.name()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Points to check (the model's own samples from a fixed seed) and `log q`
/// there, in float64.
fn check_points(flow: &dyn Flow<f64>) -> (Vec<f64>, Vec<f64>) {
    let d = flow.dim();
    let mut rng = Rng::seeded(0x00b1_5c41);
    let z: Vec<f64> = (0..CHECK_POINTS * d).map(|_| rng.normal()).collect();
    let mut x = vec![0.0; z.len()];
    let mut log_det = vec![0.0; CHECK_POINTS];
    flow.x_from_z(&z, &mut x, &mut log_det);
    let values = log_q(flow, &x);
    (x, values)
}

/// A float as Python reads it back exactly (Rust's shortest round-trip form).
fn py_float(v: f64) -> String {
    format!("{v:?}")
}

/// A float64 array: a literal when short, else exact base64 for `decode`.
fn py_array(values: &[f64]) -> String {
    if values.len() <= 16 {
        let list: Vec<String> = values.iter().map(|&v| py_float(v)).collect();
        return format!("np.array([{}])", list.join(", "));
    }
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let encoded = base64(&bytes);
    let lines: Vec<String> = encoded
        .as_bytes()
        .chunks(76)
        .map(|chunk| format!("    \"{}\"", String::from_utf8_lossy(chunk)))
        .collect();
    format!("decode(\n{}\n)", lines.join("\n"))
}

/// Standard base64 with padding (RFC 4648).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_examples() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    #[test]
    fn runs_of_one_family_are_grouped() {
        let layers = [Family::Affine, Family::Cubic, Family::Cubic, Family::Sinh];
        assert_eq!(
            groups_literal(&layers),
            "[(\"affine\", 1), (\"cubic\", 2), (\"sinh\", 1)]"
        );
        assert_eq!(
            maps(&layers),
            "1 affine map then 2 cubic maps then 1 sinh map"
        );
    }
}
