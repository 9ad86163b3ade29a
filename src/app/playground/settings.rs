//! Everything a user chooses in the 2D playground, and its home in the page's
//! URL: a shared link opens the same experiment. Parsing keeps what is valid
//! and names what it ignored, so a malformed link still opens a working page.

use crate::app::query::{apply_query, parse_in, pick};
use crate::bijection::{Family, SplineShape};
use crate::flow::{FlowConfig, FlowKind};
use crate::target::{Target, TargetKind};
use crate::train::Loss;

/// The flows the page offers (the element-wise flow is 1D, not a picture).
pub const FLOW_KINDS: [FlowKind; 3] = [
    FlowKind::Radial,
    FlowKind::RadialFourier,
    FlowKind::Coupling,
];

/// The scalar families the page offers.
pub const FAMILIES: [Family; 5] = [
    Family::CubicRational,
    Family::Sinh,
    Family::Cubic,
    Family::Affine,
    Family::Spline(SplineShape {
        bins: 8,
        bound: 5.0,
    }),
];

/// The 2D built-in targets of the page (without the 1D one).
pub fn target_names() -> impl Iterator<Item = &'static str> {
    Target::NAMES.into_iter().filter(|n| *n != "poly1d")
}

/// The distribution a run learns.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetChoice {
    /// A built-in target, by the name links and the CLI use.
    Preset(&'static str),
    /// An uploaded image (its file name).
    Upload(String),
    /// The user's drawing.
    Drawing,
}

impl TargetChoice {
    /// The built-in target called `name`, if there is one.
    pub fn preset(name: &str) -> Option<Self> {
        target_names()
            .find(|n| *n == name)
            .map(TargetChoice::Preset)
    }

    /// Its name for the user.
    pub fn label(&self) -> &str {
        match self {
            Self::Preset(name) => name,
            Self::Upload(file) => file,
            Self::Drawing => "your drawing",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub target: TargetChoice,
    pub flow: FlowKind,
    pub family: Family,
    /// scalar layers per stack
    pub stack: usize,
    /// coupling layers and conditioner width
    pub layers: usize,
    pub width: usize,
    pub learning_rate: f64,
    pub batch: usize,
    pub steps_per_frame: usize,
    pub seed: u64,
    /// train a sample target with a smooth density by reverse KL (energy
    /// targets always train by reverse KL)
    pub reverse_kl: bool,
}

impl Default for Settings {
    /// The paper's reference recipe, scaled to a page: the spiral with an
    /// angle-dependent radial flow of 64 cubic conjugations.
    fn default() -> Self {
        Self {
            target: TargetChoice::Preset("spiral"),
            flow: FlowKind::RadialFourier,
            family: Family::Cubic,
            stack: 64,
            layers: 8,
            width: 64,
            learning_rate: 1e-2,
            batch: 512,
            steps_per_frame: 4,
            seed: 0,
            reverse_kl: false,
        }
    }
}

impl Settings {
    /// The built-in target these settings name (an upload or a drawing is
    /// held by the page, not the settings).
    pub fn preset_target(&self) -> Result<Target, String> {
        match &self.target {
            TargetChoice::Preset(name) => Ok(Target::parse(name)?),
            other => Err(format!("{} is not a built-in target", other.label())),
        }
    }

    /// The architecture these settings describe.
    pub fn flow_config(&self) -> FlowConfig {
        let mut flow = FlowConfig::defaults(self.flow);
        flow.family = self.family;
        flow.stack = self.stack;
        flow.layers = self.layers;
        flow.width = self.width;
        flow.depth = 2;
        // radial flows start centred on the data (the paper's recipe for the spiral)
        flow.center = Some(if self.target == TargetChoice::Preset("spiral") {
            vec![-0.5, -1.0]
        } else {
            vec![0.0, 0.0]
        });
        flow.log_scale = Some(vec![0.0, 0.0]);
        flow
    }

    /// The settings as a URL query (without the `?`). An uploaded image or a
    /// drawing cannot travel in a link, so the target is left out for them.
    pub fn to_query(&self) -> String {
        let target = match &self.target {
            TargetChoice::Preset(name) => format!("target={name}&"),
            _ => String::new(),
        };
        let kl = if self.reverse_kl { "&kl=reverse" } else { "" };
        format!(
            "{target}flow={}&family={}&stack={}&layers={}&width={}&lr={}&batch={}&spf={}&seed={}{kl}",
            self.flow.name(),
            self.family.name(),
            self.stack,
            self.layers,
            self.width,
            self.learning_rate,
            self.batch,
            self.steps_per_frame,
            self.seed
        )
    }

    /// Settings from a URL query: every valid entry is used, the rest keep
    /// their defaults and are named in the returned list.
    pub fn from_query(query: &str) -> (Self, Vec<String>) {
        let mut s = Self::default();
        let ignored = apply_query(query, |key, value| match key {
            "target" => match TargetChoice::preset(value) {
                Some(choice) => {
                    s.target = choice;
                    true
                }
                None => false,
            },
            "flow" => pick(&mut s.flow, value, &FLOW_KINDS, |k| k.name()),
            "family" => pick(&mut s.family, value, &FAMILIES, |f| f.name()),
            "stack" => parse_in(&mut s.stack, value, 1..=256),
            "layers" => parse_in(&mut s.layers, value, 1..=16),
            "width" => parse_in(&mut s.width, value, 4..=256),
            "batch" => parse_in(&mut s.batch, value, 16..=8192),
            "spf" => parse_in(&mut s.steps_per_frame, value, 1..=64),
            "seed" => parse_in(&mut s.seed, value, 0..=u64::MAX),
            "kl" => match value {
                "reverse" | "forward" => {
                    s.reverse_kl = value == "reverse";
                    true
                }
                _ => false,
            },
            "lr" => parse_in(&mut s.learning_rate, value, 1e-5..=1.0),
            _ => false,
        });
        (s, ignored)
    }
}

/// The loss a run of `target` trains by: reverse KL for energies, and for
/// sample targets with a smooth density when `reverse_kl` asks for it.
pub fn loss_for(target: &Target, reverse_kl: bool) -> Loss {
    match target.kind() {
        TargetKind::Energy => Loss::ReverseKl,
        TargetKind::Samples if reverse_kl && target.has_smooth_density() => Loss::ReverseKl,
        TargetKind::Samples => Loss::ForwardKl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_url() {
        let s = Settings {
            target: TargetChoice::Preset("checkerboard"),
            flow: FlowKind::Coupling,
            family: Family::Sinh,
            learning_rate: 3e-3,
            seed: 42,
            reverse_kl: true,
            ..Settings::default()
        };
        let (back, ignored) = Settings::from_query(&s.to_query());
        assert_eq!(back, s);
        assert!(ignored.is_empty());
    }

    #[test]
    fn a_malformed_url_keeps_what_is_valid_and_names_the_rest() {
        let (s, ignored) = Settings::from_query(
            "?target=rings&lr=banana&stack=100000&colour=red&seed=7&flow=radial",
        );
        assert_eq!(s.target, TargetChoice::Preset("rings"));
        assert_eq!(s.seed, 7);
        assert_eq!(s.flow, FlowKind::Radial);
        assert_eq!(s.learning_rate, Settings::default().learning_rate);
        assert_eq!(s.stack, Settings::default().stack);
        assert_eq!(ignored, ["lr=banana", "stack=100000", "colour=red"]);
    }

    #[test]
    fn every_offered_choice_builds_a_flow() {
        for name in target_names() {
            for flow in FLOW_KINDS {
                for family in FAMILIES {
                    let s = Settings {
                        target: TargetChoice::Preset(name),
                        flow,
                        family,
                        stack: 2,
                        layers: 2,
                        width: 8,
                        ..Settings::default()
                    };
                    let mut rng = crate::rng::Rng::seeded(0);
                    s.flow_config().build::<f64>(2, &mut rng).unwrap();
                    s.preset_target().unwrap();
                }
            }
        }
    }
}
