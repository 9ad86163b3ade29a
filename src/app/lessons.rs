//! Lessons a class can follow: each opens a ready experiment from its link
//! (`?lesson=rings`), on whichever page it needs, with what to do and watch,
//! a question, and what the answer looks like; "Start again" puts the
//! experiment back where the lesson began.

use super::lab::settings::LabSettings;
use super::playground::settings::{Settings, TargetChoice};
use crate::bijection::Family;
use crate::flow::FlowKind;
use eframe::egui;

/// Where a lesson begins.
#[derive(Clone, Debug)]
pub enum Start {
    /// a playground run, playing
    Playground(Settings),
    /// the bijection explorer on one family, over a paused playground run
    Explorer(Family),
    /// the drawing window, to paint a density and train on it
    Drawing,
    /// the phi^4 lab with these settings, playing
    Lab(LabSettings),
}

/// One lesson.
#[derive(Clone, Debug)]
pub struct Lesson {
    /// its name in a link: `?lesson=<id>`
    pub id: &'static str,
    pub name: &'static str,
    pub start: Start,
    /// what to do and what to watch, in order
    pub steps: &'static [&'static str],
    pub question: &'static str,
    /// what the answer looks like
    pub answer: &'static str,
}

/// A lesson's playground settings: `settings` with the target named.
fn on(target: &'static str, settings: Settings) -> Settings {
    Settings {
        target: TargetChoice::Preset(target),
        ..settings
    }
}

/// A small radial flow that trains quickly.
fn radial(stack: usize, family: Family) -> Settings {
    Settings {
        flow: FlowKind::Radial,
        family,
        stack,
        batch: 512,
        steps_per_frame: 16,
        ..Settings::default()
    }
}

/// A coupling flow of `layers` layers of width 64.
fn coupling(family: Family, layers: usize, learning_rate: f64) -> Settings {
    Settings {
        flow: FlowKind::Coupling,
        family,
        stack: 4,
        layers,
        width: 64,
        learning_rate,
        batch: 512,
        steps_per_frame: 4,
        ..Settings::default()
    }
}

/// The lab at the broken point (lambda = 2), one design.
fn broken_lab(family: Family, z2: bool) -> LabSettings {
    LabSettings {
        lambda: 2.0,
        family,
        z2,
        affine_first: false,
        ..LabSettings::default()
    }
}

/// The lessons, in the order a course would take them.
pub fn lessons() -> Vec<Lesson> {
    vec![
        Lesson {
            id: "change-of-variables",
            name: "1. The change of variables",
            start: Start::Playground(on("annulus", radial(8, Family::Cubic))),
            steps: &[
                "The flow maps a standard normal z to x. Each cell of the grid carries the same probability before and after the map.",
                "Watch the grid: where the map squeezes cells together the density q(x) rises, where it stretches them the density falls. That is q(x) = N(z) |dz/dx|, the change of variables.",
                "Press Pause and compare the density view with the grid: the bright ring is where the grid's circles crowd.",
            ],
            question: "Why must every map of a flow be invertible and smooth?",
            answer: "The density of x is computed by pulling x back to z (the inverse) and multiplying by how much the map stretches volume there (the derivative). Without an inverse there is no z to evaluate; without a derivative there is no volume factor.",
        },
        Lesson {
            id: "local-bumps",
            name: "2. Local bumps: the cubic rational map",
            start: Start::Explorer(Family::CubicRational),
            steps: &[
                "The explorer shows one scalar map f, its inverse, f(x) - x and log f'.",
                "Move alpha: the slope at the centre changes, and far from the centre f(x) - x returns to zero. The map is a bump that acts locally.",
                "Move c: the bump slides along the line. Try to make the slope negative: the sliders stop where the map would stop being invertible.",
            ],
            question: "What does f(x) - x do far from the centre, and what does that mean for a stack of such maps?",
            answer: "It goes to zero in both tails: each map only reshapes a neighbourhood, so a stack composes many local deformations, each placed by its centre c.",
        },
        Lesson {
            id: "global-moves",
            name: "3. Global moves: sinh, cubic and affine maps",
            start: Start::Explorer(Family::Sinh),
            steps: &[
                "The sinh conjugation rescales locally but also shifts the tails: move beta, mu and nu and watch f(x) - x stay non-zero far out.",
                "Click cubic at the top of the explorer: like the cubic rational map it acts locally, f(x) - x returns to zero in the tails.",
                "Click affine: s and t move and scale the whole line at once, the same everywhere.",
            ],
            question: "Which of the families can move mass from one tail to the other on their own?",
            answer: "Those whose f(x) - x stays away from zero in the tails: the affine map (globally) and the sinh conjugation (local to global). The cubic rational and cubic maps need a stack and a centre placed near the mass.",
        },
        Lesson {
            id: "stacks",
            name: "4. Stacks of maps",
            start: Start::Playground(on("rings", radial(1, Family::Cubic))),
            steps: &[
                "A radial flow with a single cubic map learns the rings: one map can move mass along the radius only once, so it makes one broad band.",
                "Set the stack slider to 4 (the run starts again), then to 64, and compare each loss curve with the grey one of the run before.",
            ],
            question: "Why does a longer stack fit the rings better?",
            answer: "Each map is one local bump of the radius; two rings need the radius squeezed at two places and stretched between them, which takes several bumps composed. Measured after 3000 steps: held-out NLL about 3.55 nats with 1 map, 3.31 with 4, and 3.0 to 3.1 with 64 on most seeds (the floor, the target's entropy, is 2.63); a seed can leave one ring unresolved near 3.3.",
        },
        Lesson {
            id: "radial-rings",
            name: "5. Radial flows on radial data",
            start: Start::Playground(on("rings", radial(64, Family::Cubic))),
            steps: &[
                "The rings are symmetric about the centre, so a direct radial flow only has to learn how far to move each radius: watch the grid's circles crowd onto the rings and spread out between them.",
                "Note the number of parameters under the settings, and the held-out NLL once the curve is flat.",
            ],
            question: "How many parameters does this flow have, and what does it assume about the target?",
            answer: "260: one stack of 64 cubic maps shared by every direction, and a centre and scales. It assumes the density depends on the radius only, which the rings satisfy exactly; it reaches 3.0 to 3.1 nats after 3000 steps on most seeds (one that stalls near 3.3 has left a ring unresolved: try another seed).",
        },
        Lesson {
            id: "coupling-rings",
            name: "6. A coupling flow on the same rings",
            start: Start::Playground(on("rings", coupling(Family::CubicRational, 8, 3e-3))),
            steps: &[
                "The same rings with a coupling flow: 8 layers, each moving one coordinate given the other through a neural network.",
                "Compare its parameter count, its speed and its held-out NLL with lesson 5's radial flow.",
            ],
            question: "Is the coupling flow better on the rings, for its parameters?",
            answer: "No: with about 74,000 parameters it reached 3.09 nats after 1500 steps (18 s here), where the radial flow's 260 reached 3.0 to 3.1 in 3 s. On radial data the radial flow's assumption is worth more than the network's freedom: the paper's claim.",
        },
        Lesson {
            id: "spiral",
            name: "7. The angle-dependent radial flow on the spiral",
            start: Start::Playground(Settings::default()),
            steps: &[
                "The spiral's density is not a function of the radius alone: a direct radial flow cannot fit it.",
                "This flow's radius map depends on the direction (Fourier features of the angle): watch the rays of the grid bend to follow the arm.",
            ],
            question: "What would a direct radial flow do with the spiral?",
            answer: "Smear it into rings: it can only put mass at radii, the same in every direction. Try it: choose the radial flow (the run starts again).",
        },
        Lesson {
            id: "checkerboard",
            name: "8. Coupling layers on the checkerboard",
            start: Start::Playground(on("checkerboard", coupling(Family::CubicRational, 8, 3e-3))),
            steps: &[
                "Each coupling layer moves one coordinate given the other. Watch the square grid fold into the board's cells.",
                "The board's edges stay soft: the analytic maps are smooth everywhere, so the flow's density is too.",
            ],
            question: "Why does a coupling flow need several layers here?",
            answer: "One layer moves only one coordinate, as a function of the other; alternating layers let each coordinate depend on the other in turn, which the checkerboard's cells need.",
        },
        Lesson {
            id: "reverse-kl",
            name: "9. Reverse KL and mode seeking on an energy",
            start: Start::Playground(on("ring-mixture", radial(16, Family::CubicRational))),
            steps: &[
                "This target is an energy (an unnormalized density) with no samples: the flow trains by reverse KL, on its own samples.",
                "Watch ESS/N in the metrics: the share of the flow's samples that importance weights keep. It rises as the flow covers the target.",
                "Reverse KL is mode seeking: a flow that misses a mode pays nothing for it. Look for parts of the target the density view leaves dark.",
            ],
            question: "Why can a low reverse KL hide a missed mode, and which number warns of it?",
            answer: "Reverse KL averages over the flow's own samples, so mass it never visits never enters the loss. ESS/N stays low while the weights are uneven; a mode missed entirely can still leave ESS/N high, which is why the phi^4 lab checks against HMC.",
        },
        Lesson {
            id: "affine-instability",
            name: "10. Affine coupling at a large step",
            start: Start::Playground(on("moons", coupling(Family::Affine, 8, 1e-2))),
            steps: &[
                "An affine coupling flow at learning rate 0.01: watch the loss climb until the page stops the run as diverged.",
                "Choose cubic_rational in the family menu (the run starts again at the same rate) and watch it train.",
            ],
            question: "Why does the affine map suffer more from a large step?",
            answer: "Its log-scale multiplies the whole line, so one large step rescales all samples at once and the next step's gradients explode; the analytic maps change the line locally and stay close to the identity in the tails. Measured: at this rate the affine flow's loss passed 1e20 within 300 steps, the cubic rational flow reached 2.55 nats.",
        },
        Lesson {
            id: "image",
            name: "11. An image as a density",
            start: Start::Drawing,
            steps: &[
                "Paint a shape: its dark strokes are where the mass should be.",
                "Press Train on this: the flow learns the drawing as a density.",
                "Try a letter with a hole, such as O or B.",
            ],
            question: "What does the flow find hard about a drawing?",
            answer: "Sharp edges and empty holes: the flow's density is smooth and never exactly zero, so edges blur and holes keep some mass; more layers sharpen them.",
        },
        Lesson {
            id: "phi4-collapse",
            name: "12. phi^4: mode collapse",
            start: Start::Lab(broken_lab(Family::CubicRational, false)),
            steps: &[
                "The phi^4 field at its broken point has two modes: mostly positive or mostly negative fields, equally likely.",
                "A plain coupling flow trained by reverse KL: watch the fraction M > 0 go to 0 or 1. It has collapsed onto one mode.",
                "Its ESS/N can still look good: measured against the one mode it covers.",
            ],
            question: "How can you tell that a flow has collapsed, when its own metrics look fine?",
            answer: "Compare with an independent reference: the symmetry says <M> = 0 and half the fields have M > 0; the collapsed flow gives +-0.92 and 0 or 1.",
        },
        Lesson {
            id: "phi4-z2",
            name: "13. phi^4: the Z2-equivariant cure",
            start: Start::Lab(broken_lab(Family::Sinh, true)),
            steps: &[
                "The same broken point with a Z2-equivariant flow: odd site maps and a conditioner that sees the field up to its sign.",
                "Watch the fraction M > 0 stay at one half, and the magnetization histogram keep both peaks.",
            ],
            question: "Why can this flow not collapse?",
            answer: "Flipping the sign of its input flips the sign of its output, f(-phi) = -f(phi), so its density is symmetric under the flip and must put equal mass on both modes.",
        },
    ]
}

/// The lesson named `id` in a link, or why there is none.
pub fn find(id: &str) -> Result<Lesson, String> {
    lessons().into_iter().find(|l| l.id == id).ok_or_else(|| {
        let ids: Vec<&str> = lessons().iter().map(|l| l.id).collect();
        format!("no such lesson; one of {}", ids.join(", "))
    })
}

/// The lesson on screen.
pub struct OpenLesson {
    pub lesson: Lesson,
    /// whether its answer is shown
    pub answer_shown: bool,
}

/// What the lesson window asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LessonAction {
    StartAgain,
    Close,
}

impl OpenLesson {
    pub fn new(lesson: Lesson) -> Self {
        Self {
            lesson,
            answer_shown: false,
        }
    }

    /// The lesson's panel, beside the page (above it on a narrow screen, as
    /// a fold): its steps, the question, the answer on demand, "Start again"
    /// and "Close". Shown before the page's own panels, so it never covers
    /// them.
    pub fn ui(&mut self, ui: &mut egui::Ui) -> Option<LessonAction> {
        let narrow = ui.available_width() < NARROW;
        if narrow {
            egui::Panel::top("lesson")
                .resizable(false)
                .show(ui, |ui| {
                    egui::CollapsingHeader::new(format!("Lesson {}", self.lesson.name))
                        .id_salt("lesson fold")
                        .show(ui, |ui| self.contents_ui(ui))
                        .body_returned
                        .flatten()
                })
                .inner
        } else {
            egui::Panel::right("lesson")
                .resizable(true)
                .default_size(300.0)
                .min_size(220.0)
                .show(ui, |ui| {
                    ui.add_space(4.0);
                    ui.heading(format!("Lesson {}", self.lesson.name));
                    egui::ScrollArea::vertical()
                        .show(ui, |ui| self.contents_ui(ui))
                        .inner
                })
                .inner
        }
    }

    fn contents_ui(&mut self, ui: &mut egui::Ui) -> Option<LessonAction> {
        let mut action = None;
        let lesson = &self.lesson;
        for step in lesson.steps {
            ui.label(format!("- {step}"));
            ui.add_space(2.0);
        }
        ui.separator();
        ui.label(egui::RichText::new(lesson.question).strong());
        if self.answer_shown {
            ui.label(egui::RichText::new(lesson.answer).italics());
        } else if ui.button("Show the answer").clicked() {
            self.answer_shown = true;
        }
        ui.separator();
        ui.horizontal(|ui| {
            if ui
                .button("Start again")
                .on_hover_text("Back to where the lesson began.")
                .clicked()
            {
                action = Some(LessonAction::StartAgain);
            }
            if ui.button("Close").clicked() {
                action = Some(LessonAction::Close);
            }
        });
        action
    }
}

/// Below this width (points) the lesson folds above the page instead of
/// standing beside it.
const NARROW: f32 = 700.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lesson's experiment builds, its link names it alone, and its
    /// playground settings survive their own link.
    #[test]
    fn every_lesson_builds_and_its_link_finds_it() {
        let all = lessons();
        assert!(all.len() >= 10);
        for lesson in &all {
            assert_eq!(find(lesson.id).map(|l| l.name), Ok(lesson.name));
            assert!(!lesson.steps.is_empty() && !lesson.question.is_empty());
            let mut rng = crate::rng::Rng::seeded(0);
            match &lesson.start {
                Start::Playground(s) => {
                    s.flow_config().build::<f64>(2, &mut rng).unwrap();
                    let (back, ignored) = Settings::from_query(&s.to_query());
                    assert_eq!(&back, s, "{}", lesson.name);
                    assert!(ignored.is_empty());
                }
                Start::Lab(s) => {
                    s.model().unwrap();
                    s.design(s.family, s.z2).unwrap();
                }
                Start::Explorer(_) | Start::Drawing => {}
            }
        }
        let mut ids: Vec<&str> = all.iter().map(|l| l.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "lesson ids are unique");
    }

    #[test]
    fn an_unknown_lesson_is_named_with_the_choices() {
        let err = find("rigns").err().unwrap_or_default();
        assert!(
            err.contains("no such lesson") && err.contains("radial-rings"),
            "{err}"
        );
    }
}
