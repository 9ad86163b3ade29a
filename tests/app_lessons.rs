//! Lessons a class can follow, driven with egui's kittest harness: every
//! lesson opens from its link on its page with its steps shown and its
//! experiment running, "Start again" puts it back at its start, the answer
//! shows on demand, the menu opens them too, and a link naming no lesson says
//! so and opens a working page.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

mod app_common;

use app_common::screenshot;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flowplay::app::lessons::{Start, lessons};
use flowplay::app::playground::session::Status;
use flowplay::app::playground::settings::{Settings, TargetChoice};
use flowplay::app::{Page, PlaygroundApp};
use flowplay::bijection::Family;

/// The app a link opens, training a full frame's steps each frame (on all
/// cores: fixing the threads would start the run again, and no picture here
/// is compared).
fn harness(query: String) -> Harness<'static, PlaygroundApp> {
    harness_sized(query, [1280.0, 800.0])
}

fn harness_sized(query: String, size: [f32; 2]) -> Harness<'static, PlaygroundApp> {
    Harness::builder()
        .with_size(size)
        .wgpu()
        .build_eframe(move |_cc| {
            PlaygroundApp::from_link(&query).with_train_budget(std::time::Duration::from_secs(1))
        })
}

fn steps(h: &Harness<'static, PlaygroundApp>) -> usize {
    h.state()
        .playground()
        .session()
        .map_or(0, |s| s.steps_done())
}

#[test]
fn every_lesson_opens_from_its_link_on_its_page_with_its_steps() {
    for lesson in lessons() {
        let mut h = harness(format!("lesson={}", lesson.id));
        h.run_steps(6);
        let app = h.state();
        assert_eq!(app.lesson().map(|l| l.lesson.id), Some(lesson.id));
        match &lesson.start {
            Start::Playground(settings) => {
                assert_eq!(app.page(), Page::Playground, "{}", lesson.id);
                let session = app.playground().session().expect("a run");
                assert_eq!(&session.settings, settings, "{}", lesson.id);
                // playing (the affine lesson's run may already have stopped
                // as diverged: its own test below)
                assert_ne!(session.status, Status::Paused, "{}", lesson.id);
                assert!(session.steps_done() > 0, "{} does not train", lesson.id);
            }
            Start::Explorer(family) => {
                assert_eq!(app.page(), Page::Playground);
                assert_eq!(app.playground().explorer_family(), Some(*family));
            }
            Start::Drawing => {
                assert!(app.playground().drawing_open());
                h.get_by_label_contains("Paint where the mass should be");
            }
            Start::Lab(settings) => {
                assert_eq!(app.page(), Page::Phi4Lab, "{}", lesson.id);
                let lab = app.lab().expect("the lab");
                assert_eq!(lab.settings.lambda, settings.lambda);
                assert_eq!(lab.settings.z2, settings.z2);
                assert!(lab.runs[0].steps() > 0, "{} does not train", lesson.id);
            }
        }
        // the window says what to do and asks its question
        h.get_by_label(&format!("- {}", lesson.steps[0]));
        h.get_by_label(lesson.question);
        assert!(
            h.state()
                .query(&h.ctx)
                .contains(&format!("lesson={}", lesson.id))
        );
        if lesson.id == "local-bumps" || lesson.id == "phi4-collapse" {
            screenshot(&mut h, &format!("lesson-{}", lesson.id));
        }
    }
}

#[test]
fn a_lesson_starts_again_and_shows_its_answer_on_demand() {
    let lesson = flowplay::app::lessons::find("radial-rings").expect("the lesson");
    let mut h = harness("lesson=radial-rings".into());
    h.run_steps(10);
    let trained = steps(&h);
    assert!(trained > 0);
    h.get_by_label("Show the answer").click();
    h.run_steps(2);
    h.get_by_label(lesson.answer);
    screenshot(&mut h, "lesson-radial-rings-answer");
    // the user wanders off: another target, then back to the lesson's start
    h.state_mut().open_lesson("checkerboard").expect("a lesson");
    h.run_steps(2);
    h.state_mut().open_lesson("radial-rings").expect("a lesson");
    h.run_steps(2);
    let session = h.state().playground().session().expect("a run");
    assert_eq!(session.settings.target, TargetChoice::Preset("rings"));
    assert!(steps(&h) < trained, "{} >= {trained}", steps(&h));
    h.run_steps(8);
    let trained = steps(&h);
    h.get_by_label("Start again").click();
    h.run_steps(2);
    assert!(steps(&h) < trained, "{} >= {trained}", steps(&h));
    assert!(!h.state().lesson().expect("still open").answer_shown);
    h.get_by_label("Close").click();
    h.run_steps(2);
    assert!(h.state().lesson().is_none());
    assert!(!h.state().query(&h.ctx).contains("lesson="));
}

#[test]
fn the_lessons_menu_opens_a_lesson_on_the_lab_page() {
    let mut h = harness(String::new());
    h.run_steps(2);
    h.get_by_label("Lessons").click();
    h.run_steps(2);
    h.get_by_label("13. phi^4: the Z2-equivariant cure").click();
    h.run_steps(4);
    assert_eq!(h.state().page(), Page::Phi4Lab);
    let lab = h.state().lab().expect("the lab");
    assert!(lab.settings.z2 && lab.settings.lambda == 2.0);
}

#[test]
fn a_link_to_no_lesson_says_so_and_opens_a_working_page() {
    let mut h = harness("lesson=rigns&target=moons".into());
    h.run_steps(3);
    h.get_by_label_contains("lesson=rigns was not used: no such lesson; one of");
    assert!(h.state().lesson().is_none());
    let session = h.state().playground().session().expect("a run");
    assert_eq!(session.settings.target, TargetChoice::Preset("moons"));
    // the lab's link too
    let mut h = harness("lab=phi4&lesson=nope".into());
    h.run_steps(3);
    assert_eq!(h.state().page(), Page::Phi4Lab);
    h.get_by_label_contains("lesson=nope was not used");
}

/// The affine lesson shows what it says: at its learning rate the affine
/// coupling flow diverges and the page stops it, and the cubic rational flow
/// trains at the same rate.
#[test]
fn the_affine_lesson_diverges_where_the_analytic_map_trains() {
    let lesson = flowplay::app::lessons::find("affine-instability").expect("the lesson");
    let Start::Playground(settings) = &lesson.start else {
        panic!("a playground lesson");
    };
    let mut h = harness("lesson=affine-instability".into());
    let status = |h: &Harness<'static, PlaygroundApp>| {
        h.state()
            .playground()
            .session()
            .expect("a run")
            .status
            .clone()
    };
    for _ in 0..120 {
        h.step();
        if matches!(status(&h), Status::Stopped(_)) {
            break;
        }
    }
    let stopped = status(&h);
    assert!(
        matches!(&stopped, Status::Stopped(why) if why.contains("diverged")),
        "{stopped:?} after {} steps",
        steps(&h)
    );
    // a diverged run is not exported to bijx: the reason, and the way back
    h.get_by_label("Export as Python (bijx)").click();
    h.run_steps(2);
    h.get_by_label_contains("Cannot export as Python: the run stopped");
    let analytic = Settings {
        family: Family::CubicRational,
        ..settings.clone()
    };
    let mut h = harness(analytic.to_query());
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(100);
    let session = h.state().playground().session().expect("a run");
    assert_eq!(session.status, Status::Running);
    let losses = &session.losses;
    assert!(losses.len() >= 300, "{} steps", losses.len());
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    let (first, last) = (mean(&losses[..20]), mean(&losses[losses.len() - 20..]));
    assert!(last.is_finite() && last < first, "{first} -> {last}");
}

/// On a phone the lesson folds above the page, and opens to its steps.
#[test]
fn on_a_phone_the_lesson_folds_above_the_page() {
    let lesson = flowplay::app::lessons::find("radial-rings").expect("the lesson");
    let mut h = harness_sized("lesson=radial-rings".into(), [390.0, 844.0]);
    h.run_steps(4);
    h.get_by_label_contains("Lesson 5.").click();
    h.run_steps(4);
    h.get_by_label(&format!("- {}", lesson.steps[0]));
    h.get_by_label("Start again");
    screenshot(&mut h, "lesson-phone");
}
