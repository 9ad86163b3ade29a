//! Classroom mode, driven with egui's kittest harness: hide keys hide what
//! they name on both pages (unknown ones are named and ignored), the run bar
//! stands in for hidden controls, the presenter's view comes from a link or
//! the top bar and leaves by Esc, a classroom link opens its lesson with its
//! panels hidden, a link reproduces its run step for step whatever the
//! machine's cores, and a link opens a side-by-side comparison.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

mod app_common;

use app_common::screenshot;
use eframe::egui::Key;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flowplay::app::classroom::{PRESENTER_ZOOM, Panel};
use flowplay::app::{Page, PlaygroundApp};
use std::time::Duration;

fn harness(query: &str) -> Harness<'static, PlaygroundApp> {
    let query = query.to_string();
    Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(move |_cc| {
            PlaygroundApp::from_link(&query).with_train_budget(Duration::from_secs(1))
        })
}

/// The side of the model's density view, in points.
fn density_side(h: &Harness<'static, PlaygroundApp>) -> f32 {
    let rects = h.state().playground().view_rects();
    let (_, rect) = rects
        .iter()
        .find(|(name, _)| *name == "density")
        .expect("the density view");
    rect.width()
}

fn has_view(h: &Harness<'static, PlaygroundApp>, name: &str) -> bool {
    h.state()
        .playground()
        .view_rects()
        .iter()
        .any(|(n, _)| *n == name)
}

#[test]
fn hide_keys_hide_what_they_name_and_the_views_take_the_room() {
    let mut plain = harness("target=rings");
    plain.run_steps(3);
    let plain_side = density_side(&plain);
    plain.get_by_label("Flow Playground");
    assert!(has_view(&plain, "target"));

    let mut h = harness("target=rings&hide=controls,curves,target");
    h.run_steps(3);
    let classroom = h.state().classroom();
    for panel in [Panel::Controls, Panel::Curves, Panel::Target] {
        assert!(!classroom.shows(panel), "{panel:?}");
    }
    assert!(classroom.shows(Panel::Pages));
    // the controls are gone, the run bar stands in for them
    assert!(h.query_by_label("Flow Playground").is_none());
    h.get_by_label("Play");
    h.get_by_label("Step");
    h.get_by_label("Reset");
    assert!(!has_view(&h, "target"));
    assert!(
        density_side(&h) > plain_side + 100.0,
        "the model's view grows: {} vs {plain_side}",
        density_side(&h)
    );
    assert!(
        h.state()
            .query(&h.ctx)
            .contains("hide=controls,curves,target")
    );
    screenshot(&mut h, "classroom-hidden");

    // Play on the run bar trains; "Controls" brings the settings back
    h.get_by_label("Play").click();
    h.run_steps(3);
    assert!(h.state().playground().session().unwrap().steps_done() > 0);
    h.get_by_label("Controls").click();
    h.run_steps(2);
    h.get_by_label("Flow Playground");
    assert!(!h.state().classroom().shows(Panel::Curves));
}

#[test]
fn unknown_hide_keys_are_named_and_ignored() {
    let mut h = harness("target=rings&hide=controls,banana&present=maybe");
    h.run_steps(3);
    assert!(!h.state().classroom().shows(Panel::Controls));
    assert!(!h.state().classroom().presenting);
    h.get_by_label_contains("'banana' not a panel: the panels are controls, curves, target, pages");
    h.get_by_label_contains("present=maybe (on or off)");
}

#[test]
fn the_presenter_view_comes_from_the_top_bar_and_leaves_by_esc() {
    let mut h = harness("target=rings");
    h.run_steps(2);
    h.get_by_label("Present").click();
    h.run_steps(3);
    assert!(h.state().classroom().presenting);
    assert!(!h.state().classroom().shows(Panel::Controls));
    assert_eq!(h.ctx.zoom_factor(), PRESENTER_ZOOM);
    assert!(h.state().query(&h.ctx).contains("present=on"));
    screenshot(&mut h, "classroom-presenter");

    h.key_press(Key::Escape);
    h.run_steps(3);
    assert!(!h.state().classroom().presenting);
    assert!(h.state().classroom().shows(Panel::Controls));
    assert_eq!(h.ctx.zoom_factor(), 1.0);
    assert!(!h.state().query(&h.ctx).contains("present"));
}

#[test]
fn a_classroom_link_opens_its_lesson_with_its_panels_hidden() {
    let mut h = harness("lesson=radial-rings&present=on&hide=curves,pages");
    h.run_steps(6);
    let app = h.state();
    assert_eq!(app.lesson().map(|l| l.lesson.id), Some("radial-rings"));
    assert!(app.classroom().presenting);
    assert_eq!(h.ctx.zoom_factor(), PRESENTER_ZOOM);
    assert!(
        h.query_by_label("Lessons").is_none(),
        "the top bar is hidden"
    );
    assert!(h.query_by_label("Flow Playground").is_none());
    assert!(app.playground().session().unwrap().steps_done() > 0);
    h.get_by_label("Pause");
    let query = app.query(&h.ctx);
    assert!(
        query.contains("lesson=radial-rings") && query.contains("present=on&hide=curves,pages"),
        "{query}"
    );
    screenshot(&mut h, "classroom-lesson");
}

#[test]
fn the_lab_hides_what_a_link_names() {
    let mut h = harness("lab=phi4&hide=controls,curves,axes");
    h.run_steps(3);
    assert_eq!(h.state().page(), Page::Phi4Lab);
    assert!(h.query_by_label("phi^4 lattice lab").is_none());
    // its message, which the controls hold, stands above the views
    h.get_by_label_contains("'axes' not a panel");
    h.get_by_label("Play").click();
    h.run_steps(3);
    assert!(h.state().lab().unwrap().runs[0].steps() > 0);
    h.get_by_label("Controls").click();
    h.run_steps(2);
    h.get_by_label("phi^4 lattice lab");
}

#[test]
fn a_link_reproduces_its_run_step_for_step_on_any_number_of_cores() {
    let losses = |threads: usize| {
        let mut h = Harness::builder()
            .with_size([1280.0, 800.0])
            .wgpu()
            .build_eframe(move |_cc| {
                PlaygroundApp::from_link("target=moons&flow=coupling&layers=4&width=32&seed=5")
                    .with_cpu_threads(threads)
                    .with_train_budget(Duration::from_secs(1))
            });
        h.run_steps(2);
        h.get_by_label("Play").click();
        h.run_steps(6);
        let session = h.state().playground().session().unwrap();
        assert!(session.steps_done() > 0);
        session.losses.clone()
    };
    let one = losses(1);
    assert!(one.len() >= 4, "{} losses", one.len());
    let three = losses(3);
    let n = one.len().min(three.len());
    assert_eq!(one[..n], three[..n]);
}

/// A link opens the side-by-side comparison on a preset, its runs playing
/// (a lecturer's link to the paper's claims); the address keeps it while it
/// is on screen; an unknown preset is named and the page opens as usual.
#[test]
fn a_link_opens_a_side_by_side_comparison() {
    let mut h = harness("compare=families&spf=8");
    h.run_steps(5);
    let comparison = h.state().playground().comparison().expect("the window");
    assert_eq!(comparison.runs.len(), 3);
    assert!(comparison.running());
    assert!(comparison.runs.iter().all(|r| r.session.steps_done() > 0));
    let title = h.state().playground().title().unwrap();
    assert!(title.contains("side by side on spiral | steps "), "{title}");
    let query = h.state().query(&h.ctx);
    assert!(query.contains("compare=families"), "{query}");
    screenshot(&mut h, "classroom-side-by-side");

    let mut bad = harness("target=moons&compare=nope");
    bad.run_steps(2);
    bad.get_by_label_contains(
        "compare=nope was not used: one of radial-vs-coupling, affine-vs-analytic, families",
    );
    assert!(bad.state().playground().comparison().is_none());
    assert!(!bad.state().query(&bad.ctx).contains("compare"));
}
