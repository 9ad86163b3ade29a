//! Flows on the phi^4 lattice field (math.md section 6): the designs the CLI
//! and the page train, and one run: reverse-KL training from the action alone,
//! then the flow's samples measured and corrected ([`crate::mcmc::flow_estimates`]).

use super::TrainSettings;
use super::run::{Backend, Precision, RunConfig, RunOutcome, train_with, trainer};
use crate::bijection::Family;
use crate::flow::{FlowConfig, FlowKind};
use crate::mcmc::flow_estimates::{FlowEstimates, estimate_with_flow};
use crate::rng::Rng;
use crate::target::Target;
use crate::target::phi4::Phi4;

/// A flow design on the lattice: architecture, family and whether Z2-equivariant.
#[derive(Clone, Debug)]
pub struct Design {
    pub flow: FlowConfig,
}

impl Design {
    /// A flow of `kind` ("coupling" = the lattice coupling flow) with the
    /// phi^4 defaults: 8 coupling layers, 8 channels, 1 residual block, one
    /// copy of the family per site; 16 copies for the radial flow.
    pub fn new(kind: &str, family: Family, z2: bool) -> Result<Design, String> {
        let kind = match kind {
            "coupling" | "lattice" => FlowKind::Lattice,
            "radial" => FlowKind::Radial,
            "elementwise" => FlowKind::Elementwise,
            other => {
                return Err(format!(
                    "--flow must be coupling, radial or elementwise on the lattice, got '{other}'"
                ));
            }
        };
        if z2 && kind == FlowKind::Elementwise {
            return Err("--z2 applies to coupling and radial flows".into());
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

    /// e.g. "coupling sinh", "coupling sinh Z2", "radial cubic Z2".
    pub fn label(&self) -> String {
        let kind = match self.flow.kind {
            FlowKind::Lattice => "coupling",
            other => other.name(),
        };
        let z2 = if self.flow.z2 { " Z2" } else { "" };
        format!("{kind} {}{z2}", self.flow.family.name())
    }
}

/// What a flow run on the lattice produced.
pub struct Phi4FlowRun {
    pub outcome: RunOutcome,
    pub estimates: FlowEstimates,
}

/// Trains `design` on `model` on `backend` and measures it with `samples`
/// flow samples (on the CPU, in float64).
#[allow(clippy::too_many_arguments)] // one run's full description, as the CLI gives it
pub fn flow_run(
    model: &Phi4,
    design: &Design,
    steps: usize,
    settings: TrainSettings,
    precision: Precision,
    backend: Backend,
    samples: usize,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<Phi4FlowRun, String> {
    let config = RunConfig {
        target: Target::Phi4(*model),
        flow: design.flow_for(model),
        steps,
        settings,
        precision,
        eval_samples: samples,
    };
    let outcome = train_with(&config, trainer(&config, backend)?, progress)?;
    let mut rng = Rng::seeded(config.settings.seed.wrapping_add(0x0e57_1a7e));
    let estimates = estimate_with_flow(outcome.model.as_flow(), model, samples, &mut rng)?;
    Ok(Phi4FlowRun { outcome, estimates })
}

/// The designs `compare` trains: the affine baseline, each analytic family,
/// and the Z2-equivariant coupling and radial flows.
pub fn comparison_designs() -> Vec<Design> {
    let coupling = |family, z2| Design::new("coupling", family, z2);
    [
        coupling(Family::Affine, false),
        coupling(Family::CubicRational, false),
        coupling(Family::Sinh, false),
        coupling(Family::Cubic, false),
        coupling(Family::CubicRational, true),
        coupling(Family::Sinh, true),
        Design::new("radial", Family::Cubic, true),
    ]
    .into_iter()
    .map(|d| d.unwrap_or_else(|e| unreachable!("fixed designs are valid: {e}")))
    .collect()
}
