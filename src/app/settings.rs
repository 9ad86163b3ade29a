//! Everything a user chooses, and its home in the page's URL: a shared link
//! opens the same experiment. Parsing keeps what is valid and names what it
//! ignored, so a malformed link still opens a working page.

use crate::bijection::Family;
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
pub const FAMILIES: [&str; 5] = ["cubic_rational", "sinh", "cubic", "affine", "spline"];

/// The 2D targets of the page (math.md section 5, without the 1D one).
pub fn target_names() -> impl Iterator<Item = &'static str> {
    Target::NAMES.into_iter().filter(|n| *n != "poly1d")
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub target: String,
    pub flow: FlowKind,
    pub family: String,
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
            target: "spiral".into(),
            flow: FlowKind::RadialFourier,
            family: "cubic".into(),
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
    pub fn target(&self) -> Result<Target, String> {
        Target::parse(&self.target)
    }

    pub fn family(&self) -> Result<Family, String> {
        Family::parse(&self.family)
    }

    /// Forward KL where there are samples, reverse KL for energies, and the
    /// user's choice where a target has both samples and a smooth density.
    pub fn loss(&self) -> Result<Loss, String> {
        Ok(loss_for(&self.target()?, self.reverse_kl))
    }

    /// The architecture these settings describe.
    pub fn flow_config(&self) -> Result<FlowConfig, String> {
        let mut flow = FlowConfig::defaults(self.flow);
        flow.family = self.family()?;
        flow.stack = self.stack;
        flow.layers = self.layers;
        flow.width = self.width;
        flow.depth = 2;
        // radial flows start centred on the data (math.md's recipe for the spiral)
        flow.center = Some(if self.target == "spiral" {
            vec![-0.5, -1.0]
        } else {
            vec![0.0, 0.0]
        });
        flow.log_scale = Some(vec![0.0, 0.0]);
        Ok(flow)
    }

    /// The settings as a URL query (without the `?`).
    pub fn to_query(&self) -> String {
        let kl = if self.reverse_kl { "&kl=reverse" } else { "" };
        format!(
            "target={}&flow={}&family={}&stack={}&layers={}&width={}&lr={}&batch={}&spf={}&seed={}{kl}",
            self.target,
            self.flow.name(),
            self.family,
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
            "target" => set_if(
                &mut s.target,
                value.to_string(),
                target_names().any(|n| n == value),
            ),
            "flow" => match FlowKind::parse(value) {
                Ok(kind) if FLOW_KINDS.contains(&kind) => {
                    s.flow = kind;
                    true
                }
                _ => false,
            },
            "family" => set_if(&mut s.family, value.to_string(), FAMILIES.contains(&value)),
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
            "lr" => match value.parse::<f64>() {
                Ok(v) if (1e-5..=1.0).contains(&v) => {
                    s.learning_rate = v;
                    true
                }
                _ => false,
            },
            _ => false,
        });
        (s, ignored)
    }
}

/// Hands each `key=value` entry of a URL query to `apply`, which uses it and
/// says whether it was valid; returns the entries that were not.
pub fn apply_query(query: &str, mut apply: impl FnMut(&str, &str) -> bool) -> Vec<String> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            !apply(key, value)
        })
        .map(str::to_string)
        .collect()
}

/// A preset that opens straight into a good lesson.
pub struct Lesson {
    pub name: &'static str,
    /// what to watch for, in a sentence or two
    pub what: &'static str,
    pub settings: Settings,
}

/// The lessons the page offers.
pub fn lessons() -> Vec<Lesson> {
    vec![
        Lesson {
            name: "Radial flow on rings",
            what: "The rings are symmetric about the centre, so a direct radial flow only has to learn how far to move each radius: watch the grid's circles crowd onto the rings and spread out between them.",
            settings: Settings {
                target: "rings".into(),
                flow: FlowKind::Radial,
                family: "cubic_rational".into(),
                stack: 16,
                batch: 512,
                steps_per_frame: 16,
                ..Settings::default()
            },
        },
        Lesson {
            name: "Coupling flow on the checkerboard",
            what: "Each coupling layer moves one coordinate given the other. Watch the square grid fold into the board's cells, and how the sharp edges stay soft: the analytic maps are smooth everywhere.",
            settings: Settings {
                target: "checkerboard".into(),
                flow: FlowKind::Coupling,
                family: "cubic_rational".into(),
                stack: 4,
                layers: 8,
                width: 64,
                learning_rate: 3e-3,
                batch: 512,
                steps_per_frame: 4,
                ..Settings::default()
            },
        },
        Lesson {
            name: "The spiral (the paper's recipe)",
            what: "An angle-dependent radial flow of 64 cubic maps: the radius map depends on the direction, so the rays of the grid bend to follow the spiral arm.",
            settings: Settings::default(),
        },
    ]
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

/// Stores `value` when `valid`; says whether it was.
pub fn set_if<T>(slot: &mut T, value: T, valid: bool) -> bool {
    if valid {
        *slot = value;
    }
    valid
}

/// Stores `value` parsed when it lies in `range`; says whether it did.
pub fn parse_in<T: std::str::FromStr + PartialOrd>(
    slot: &mut T,
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> bool {
    match value.parse::<T>() {
        Ok(v) if range.contains(&v) => {
            *slot = v;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_url() {
        let s = Settings {
            target: "checkerboard".into(),
            flow: FlowKind::Coupling,
            family: "sinh".into(),
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
        assert_eq!(s.target, "rings");
        assert_eq!(s.seed, 7);
        assert_eq!(s.flow, FlowKind::Radial);
        assert_eq!(s.learning_rate, Settings::default().learning_rate);
        assert_eq!(s.stack, Settings::default().stack);
        assert_eq!(ignored, ["lr=banana", "stack=100000", "colour=red"]);
    }

    #[test]
    fn every_lesson_builds_and_survives_its_link() {
        for lesson in lessons() {
            let s = &lesson.settings;
            let mut rng = crate::rng::Rng::seeded(0);
            s.flow_config().unwrap().build::<f64>(2, &mut rng).unwrap();
            let (back, ignored) = Settings::from_query(&s.to_query());
            assert_eq!(&back, s, "{}", lesson.name);
            assert!(ignored.is_empty());
        }
    }

    #[test]
    fn every_offered_choice_builds_a_flow() {
        for name in target_names() {
            for flow in FLOW_KINDS {
                for family in FAMILIES {
                    let s = Settings {
                        target: name.into(),
                        flow,
                        family: family.into(),
                        stack: 2,
                        layers: 2,
                        width: 8,
                        ..Settings::default()
                    };
                    let config = s.flow_config().unwrap();
                    let mut rng = crate::rng::Rng::seeded(0);
                    config.build::<f64>(2, &mut rng).unwrap();
                    s.loss().unwrap();
                }
            }
        }
    }
}
