//! The lattice conditioner's design in a model file (`"conv"` of a lattice flow).

use super::{ModelFileError, Result, count, numbers};
use crate::flow::{Activation, ConvDesign};
use serde_json::{Value, json};

/// A lattice conditioner's design: `{"kernel": 3, "activation": "gelu",
/// "channels": null or [8, 8], "head_bound": 0}`, every key optional.
pub(super) fn parse_conv(v: &Value) -> Result<ConvDesign> {
    let what = "model 'conv'";
    let mut conv = ConvDesign::default();
    if v.get("kernel").is_some() {
        conv.kernel = count(v, "kernel", what)?;
    }
    if let Some(a) = v.get("activation") {
        let name = a.as_str().ok_or_else(|| ModelFileError::Expected {
            what: format!("{what}: 'activation'"),
            expected: "a string",
        })?;
        conv.activation = Activation::parse(name).map_err(ModelFileError::Invalid)?;
    }
    if let Some(list) = v.get("channels").filter(|c| !c.is_null()) {
        let list = numbers(list, "model 'conv': 'channels'")?;
        if list
            .iter()
            .any(|&c| c.fract() != 0.0 || !(1.0..=1e6).contains(&c))
        {
            return Err(ModelFileError::Invalid(format!(
                "{what}: 'channels' must be positive whole numbers"
            )));
        }
        conv.channels = Some(list.into_iter().map(|c| c as usize).collect());
    }
    if let Some(b) = v.get("head_bound") {
        conv.head_bound = b.as_f64().ok_or_else(|| ModelFileError::Expected {
            what: format!("{what}: 'head_bound'"),
            expected: "a number",
        })?;
    }
    Ok(conv)
}

/// The JSON [`parse_conv`] reads.
pub(super) fn conv_json(conv: &ConvDesign) -> Value {
    json!({
        "kernel": conv.kernel,
        "activation": conv.activation.name(),
        "channels": conv.channels,
        "head_bound": conv.head_bound,
    })
}
