//! Lessons: presets that open straight into a good experiment and say what to
//! watch.

use super::settings::{Settings, TargetChoice};
use crate::bijection::Family;
use crate::flow::FlowKind;

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
                target: TargetChoice::Preset("rings"),
                flow: FlowKind::Radial,
                family: Family::CubicRational,
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
                target: TargetChoice::Preset("checkerboard"),
                flow: FlowKind::Coupling,
                family: Family::CubicRational,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_builds_and_survives_its_link() {
        for lesson in lessons() {
            let s = &lesson.settings;
            let mut rng = crate::rng::Rng::seeded(0);
            s.flow_config().build::<f64>(2, &mut rng).unwrap();
            let (back, ignored) = Settings::from_query(&s.to_query());
            assert_eq!(&back, s, "{}", lesson.name);
            assert!(ignored.is_empty());
        }
    }
}
