//! Everything a user chooses in the 2D playground, and its home in the page's
//! URL: a shared link opens the same experiment. Parsing keeps what is valid
//! and names what it ignored, so a malformed link still opens a working page.

use crate::app::query::{Entry, apply_query, parse_in, pick, set_if, unknown};
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

/// The ranges the page's controls offer, which a link is held to as well.
pub const LEARNING_RATES: std::ops::RangeInclusive<f64> = 1e-4..=1e-1;
pub const STACKS: std::ops::RangeInclusive<usize> = 1..=128;
pub const LAYERS: std::ops::RangeInclusive<usize> = 1..=16;
pub const WIDTHS: std::ops::RangeInclusive<usize> = 8..=256;
pub const BATCHES: std::ops::RangeInclusive<usize> = 16..=4096;
pub const STEPS_PER_FRAME: std::ops::RangeInclusive<usize> = 1..=64;

/// The 2D built-in targets of the page (without the 1D one).
pub fn target_names() -> impl Iterator<Item = &'static str> {
    Target::NAMES.into_iter().filter(|n| *n != "poly1d")
}

/// The stack and learning rate a flow trains well with, and the most of each
/// it tolerates: settings carried over from another flow are brought back
/// within these.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Suits {
    pub stack: usize,
    pub max_stack: usize,
    pub learning_rate: f64,
    pub max_learning_rate: f64,
}

impl Suits {
    /// What suits `flow`: radial flows take long stacks and a large step (a
    /// few hundred parameters); a coupling flow's network wants a short
    /// stack and a smaller step.
    pub fn of(flow: FlowKind) -> Self {
        match flow {
            FlowKind::Coupling => Self {
                stack: 4,
                max_stack: 8,
                learning_rate: 3e-3,
                max_learning_rate: 5e-3,
            },
            _ => Self {
                stack: 64,
                max_stack: 128,
                learning_rate: 1e-2,
                max_learning_rate: 3e-2,
            },
        }
    }
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

    /// The run in a few words, e.g. "coupling, sinh, stack 4, lr 0.003 on checkerboard".
    pub fn describe(&self) -> String {
        format!(
            "{}, {}, stack {}, lr {} on {}",
            self.flow.name(),
            self.family.name(),
            self.stack,
            self.learning_rate,
            self.target.label()
        )
    }

    /// Brings the stack and learning rate within what `self.flow` tolerates
    /// (after the flow changed); says what changed, if anything.
    pub fn suit_flow(&mut self) -> Option<String> {
        let suits = Suits::of(self.flow);
        let mut changes = Vec::new();
        if self.stack > suits.max_stack {
            changes.push(format!("the stack from {} to {}", self.stack, suits.stack));
            self.stack = suits.stack;
        }
        if self.learning_rate > suits.max_learning_rate {
            changes.push(format!(
                "the learning rate from {} to {}",
                self.learning_rate, suits.learning_rate
            ));
            self.learning_rate = suits.learning_rate;
        }
        (!changes.is_empty()).then(|| {
            format!(
                "A {} flow trains well with a stack of {} and a learning rate of {}: {} changed.",
                self.flow.name(),
                suits.stack,
                suits.learning_rate,
                changes.join(" and ")
            )
        })
    }

    /// The likely cause of a divergence under these settings, for the user.
    pub fn divergence_advice(&self) -> String {
        let suits = Suits::of(self.flow);
        let lr = self.learning_rate;
        let mut causes = Vec::new();
        if lr > suits.learning_rate {
            causes.push(format!(
                "the learning rate, {lr}, is above the {} that suits a {} flow",
                suits.learning_rate,
                self.flow.name()
            ));
        } else {
            causes.push(format!("the learning rate, {lr}, is too high for this run"));
        }
        if self.stack > suits.max_stack {
            causes.push(format!(
                "a stack of {} is deep for it ({} suits it)",
                self.stack, suits.stack
            ));
        }
        format!("Likely cause: {}.", causes.join(", and "))
    }

    /// Whether `other` needs a new run to show (a different target, flow,
    /// family, size, batch, seed or loss); the learning rate and the steps
    /// per frame apply to the run on screen.
    pub fn needs_new_run(&self, other: &Settings) -> bool {
        let live = |s: &Settings| Settings {
            learning_rate: 0.0,
            steps_per_frame: 0,
            ..s.clone()
        };
        live(self) != live(other)
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
        let ignored = apply_query(query, |key, value| -> Entry {
            match key {
                "target" => match TargetChoice::preset(value) {
                    Some(choice) => set_if(&mut s.target, choice, true, ""),
                    None => Err(format!(
                        "one of {}",
                        target_names().collect::<Vec<_>>().join(", ")
                    )),
                },
                "flow" => pick(&mut s.flow, value, &FLOW_KINDS, |k| k.name()),
                "family" => pick(&mut s.family, value, &FAMILIES, |f| f.name()),
                "stack" => parse_in(&mut s.stack, value, STACKS),
                "layers" => parse_in(&mut s.layers, value, LAYERS),
                "width" => parse_in(&mut s.width, value, WIDTHS),
                "batch" => parse_in(&mut s.batch, value, BATCHES),
                "spf" => parse_in(&mut s.steps_per_frame, value, STEPS_PER_FRAME),
                "seed" => parse_in(&mut s.seed, value, 0..=u64::MAX),
                "kl" => set_if(
                    &mut s.reverse_kl,
                    value == "reverse",
                    value == "reverse" || value == "forward",
                    "reverse or forward",
                ),
                "lr" => parse_in(&mut s.learning_rate, value, LEARNING_RATES),
                _ => unknown(),
            }
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
        assert_eq!(
            ignored,
            [
                "lr=banana (not a number)",
                "stack=100000 (out of range: 1 to 128)",
                "colour=red (not a setting)"
            ]
        );
        let (s, ignored) = Settings::from_query("lr=1&flow=planar");
        assert_eq!(s.learning_rate, Settings::default().learning_rate);
        assert_eq!(
            ignored,
            [
                "lr=1 (out of range: 0.0001 to 0.1)",
                "flow=planar (one of radial, radial-fourier, coupling)"
            ]
        );
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
