//! Flow designs on the phi^4 lattice field: the architectures the CLI and the
//! page train (lattice coupling, radial, element-wise; plain or Z2-equivariant).

use crate::bijection::Family;
use crate::flow::{FlowConfig, FlowKind};
use crate::target::phi4::Phi4;

/// Why a design cannot be made on the lattice.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DesignError {
    #[error("--flow must be coupling, radial or elementwise on the lattice, got '{0}'")]
    UnknownKind(String),
    #[error("the {0} flow is for 2D data, not the lattice")]
    NotForTheLattice(&'static str),
    #[error("--z2 applies to coupling and radial flows")]
    Z2Elementwise,
}

/// The message, where errors meet a person (the command line, the page).
impl From<DesignError> for String {
    fn from(e: DesignError) -> String {
        e.to_string()
    }
}

/// A flow design on the lattice: architecture, family and whether Z2-equivariant.
#[derive(Clone, Debug)]
pub struct Design {
    pub flow: FlowConfig,
}

impl Design {
    /// The lattice flow a name means: `coupling` (or `lattice`: the lattice
    /// coupling flow), `radial` or `elementwise`.
    pub fn parse_kind(name: &str) -> Result<FlowKind, DesignError> {
        match name {
            "coupling" | "lattice" => Ok(FlowKind::Lattice),
            "radial" => Ok(FlowKind::Radial),
            "elementwise" => Ok(FlowKind::Elementwise),
            other => Err(DesignError::UnknownKind(other.to_string())),
        }
    }

    /// A site map: one family by name, or two joined by '+' (the first applied
    /// first in the sampling direction), e.g. `affine+cubic_rational`.
    pub fn parse_site_maps(name: &str) -> Result<(Option<Family>, Family), String> {
        let parse = |n: &str| Family::parse(n).map_err(|e| e.to_string());
        match name.split_once('+') {
            None => Ok((None, parse(name)?)),
            Some((first, then)) => Ok((Some(parse(first)?), parse(then)?)),
        }
    }

    /// A flow of `kind` (lattice coupling, radial or element-wise) with the
    /// phi^4 defaults: 8 coupling layers, 8 channels, 1 residual block, one
    /// copy of the family per site; 16 copies for the radial flow.
    pub fn new(kind: FlowKind, family: Family, z2: bool) -> Result<Design, DesignError> {
        if matches!(kind, FlowKind::Coupling | FlowKind::RadialFourier) {
            return Err(DesignError::NotForTheLattice(kind.name()));
        }
        if z2 && kind == FlowKind::Elementwise {
            return Err(DesignError::Z2Elementwise);
        }
        let mut flow = FlowConfig::defaults(kind);
        flow.family = family;
        flow.z2 = z2;
        flow.stack = if kind == FlowKind::Radial { 16 } else { 1 };
        flow.layers = 8;
        flow.width = 8;
        flow.depth = 1;
        Ok(Design { flow })
    }

    /// The flow for `model`'s lattice: radial flows start centred at phi = 0
    /// (where the Z2-equivariant one stays; a random centre would sit far out
    /// in the field's many dimensions).
    pub fn flow_for(&self, model: &Phi4) -> FlowConfig {
        let mut flow = self.flow.clone();
        if flow.kind == FlowKind::Radial && flow.center.is_none() {
            flow.center = Some(vec![0.0; model.volume()]);
            flow.log_scale = Some(vec![0.0; model.volume()]);
        }
        flow
    }

    /// e.g. "coupling sinh", "coupling sinh Z2", "radial cubic Z2",
    /// "coupling affine+cubic_rational".
    pub fn label(&self) -> String {
        let kind = match self.flow.kind {
            FlowKind::Lattice => "coupling",
            other => other.name(),
        };
        let z2 = if self.flow.z2 { " Z2" } else { "" };
        let first = self
            .flow
            .first
            .map_or(String::new(), |f| format!("{}+", f.name()));
        format!("{kind} {first}{}{z2}", self.flow.family.name())
    }
}

/// The designs `compare` trains: the affine baseline, each analytic family,
/// and the Z2-equivariant coupling and radial flows.
pub fn comparison_designs() -> Vec<Design> {
    let coupling = |family, z2| Design::new(FlowKind::Lattice, family, z2);
    [
        coupling(Family::Affine, false),
        coupling(Family::CubicRational, false),
        coupling(Family::Sinh, false),
        coupling(Family::Cubic, false),
        coupling(Family::CubicRational, true),
        coupling(Family::Sinh, true),
        Design::new(FlowKind::Radial, Family::Cubic, true),
    ]
    .into_iter()
    .map(|d| d.unwrap_or_else(|e| unreachable!("fixed designs are valid: {e}")))
    .collect()
}
