//! The page behaves as people expect, driven with egui's kittest harness:
//! a changed setting starts a new run at once (asking first before a long
//! run is set aside), the address follows what is on screen, a diverging
//! run stops with its likely cause and goes on from its last good state at
//! half the rate, a flow takes settings that suit it, and a phone's narrow
//! screen still shows every view.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

mod app_common;

use app_common::screenshot;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flowplay::app::PlaygroundApp;
use flowplay::app::lab::settings::LabSettings;
use flowplay::app::playground::session::Status;
use flowplay::app::playground::settings::{Settings, TargetChoice};
use flowplay::bijection::Family;
use flowplay::flow::FlowKind;

/// Training may take a second a frame, so a frame always takes its full
/// steps per frame however busy the machine.
const BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

fn harness_sized(settings: Settings, size: [f32; 2]) -> Harness<'static, PlaygroundApp> {
    Harness::builder()
        .with_size(size)
        .wgpu()
        .build_eframe(move |_cc| {
            PlaygroundApp::with_settings(settings)
                .with_train_budget(BUDGET)
                .with_cpu_threads(2)
        })
}

fn harness(settings: Settings) -> Harness<'static, PlaygroundApp> {
    harness_sized(settings, [1280.0, 800.0])
}

/// A small, quick radial run.
fn small(target: &'static str) -> Settings {
    Settings {
        target: TargetChoice::Preset(target),
        flow: FlowKind::Radial,
        stack: 4,
        batch: 64,
        steps_per_frame: 8,
        ..Settings::default()
    }
}

fn session<'a>(
    h: &'a Harness<'static, PlaygroundApp>,
) -> &'a flowplay::app::playground::session::Session {
    h.state().playground().session().expect("a run")
}

/// Opens the drop-down menu labelled `label` (the first widget of that name:
/// a view's "save PNG" button may share it).
fn open_menu(h: &mut Harness<'static, PlaygroundApp>, label: &str) {
    h.get_all_by_label(label)
        .next()
        .unwrap_or_else(|| panic!("no {label} menu"))
        .click();
    h.run_steps(2);
}

fn query(h: &Harness<'static, PlaygroundApp>) -> String {
    h.state().query(&h.ctx)
}

#[test]
fn a_changed_target_starts_a_new_run_at_once_and_keeps_the_old_curve() {
    let mut h = harness(small("moons"));
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(5);
    let old_steps = session(&h).steps_done();
    assert!(old_steps > 0);
    open_menu(&mut h, "target");
    h.run_steps(2);
    h.get_by_label("rings").click();
    h.run_steps(3);
    let s = session(&h);
    assert_eq!(s.settings.target, TargetChoice::Preset("rings"));
    assert_eq!(
        s.status,
        Status::Running,
        "the new run plays as the old one did"
    );
    assert!(s.steps_done() < old_steps + 40);
    let previous = h
        .state()
        .playground()
        .previous()
        .expect("the old run's curve");
    assert!(previous.label.contains("moons"), "{}", previous.label);
    assert!(previous.losses.len() >= old_steps);
    // the address follows: the run on screen, no Copy link needed
    assert!(query(&h).contains("target=rings"), "{}", query(&h));
    screenshot(&mut h, "behaviour-new-run-with-previous-curve");
}

#[test]
fn the_tab_title_follows_training_four_times_a_second_and_ends_on_the_last_step() {
    // frames a sixtieth of a second apart, as in a browser
    let mut h = Harness::builder()
        .with_size([1280.0, 800.0])
        .with_step_dt(1.0 / 60.0)
        .wgpu()
        .build_eframe(|_cc| {
            PlaygroundApp::with_settings(small("moons"))
                .with_train_budget(BUDGET)
                .with_cpu_threads(2)
        });
    h.run_steps(2);
    assert!(
        h.state().tab_title().contains("step 0"),
        "{}",
        h.state().tab_title()
    );
    h.get_by_label("Play").click();
    // two seconds of frames: the step changes every frame, the title at
    // most every quarter second
    let mut titles = vec![h.state().tab_title().to_string()];
    for _ in 0..120 {
        h.run_steps(1);
        if titles.last().map(String::as_str) != Some(h.state().tab_title()) {
            titles.push(h.state().tab_title().to_string());
        }
    }
    assert!(
        (5..=10).contains(&titles.len()),
        "{} titles in 2 s: {titles:?}",
        titles.len()
    );
    // paused, the last change held back is still shown once due
    h.get_by_label("Pause").click();
    h.run_steps(20);
    let shown = h.state().playground().title().expect("a title");
    assert_eq!(h.state().tab_title(), shown);
}

#[test]
fn a_long_run_is_set_aside_only_when_the_user_agrees() {
    let mut settings = small("moons");
    settings.steps_per_frame = 64;
    settings.batch = 16;
    let mut h = harness(settings);
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(17); // 64 steps a frame: past 1,000 steps
    assert!(session(&h).steps_done() >= 1000);
    open_menu(&mut h, "target");
    h.run_steps(2);
    h.get_by_label("rings").click();
    h.run_steps(3);
    assert!(h.state().playground().asking());
    assert_eq!(session(&h).settings.target, TargetChoice::Preset("moons"));
    h.get_by_label_contains("will be set aside");
    // keep: the controls go back to the run on screen
    h.get_by_label("Keep this run").click();
    h.run_steps(3);
    assert!(!h.state().playground().asking());
    assert_eq!(
        h.state().playground().settings().target,
        TargetChoice::Preset("moons")
    );
    assert!(session(&h).steps_done() >= 1000);
    // and agreeing starts the new run
    open_menu(&mut h, "target");
    h.run_steps(2);
    h.get_by_label("rings").click();
    h.run_steps(3);
    h.get_by_label("Start the new run").click();
    h.run_steps(2);
    assert_eq!(session(&h).settings.target, TargetChoice::Preset("rings"));
    assert!(session(&h).steps_done() < 1000);
}

#[test]
fn a_diverging_run_stops_with_its_cause_and_goes_on_at_half_the_rate() {
    // a radial flow's learning rate and stack carried into a coupling flow
    // (the settings the issue measured): 4 nats at the start, then 26, 12, 22...
    let settings = Settings {
        target: TargetChoice::Preset("rings"),
        flow: FlowKind::Coupling,
        family: Family::CubicRational,
        stack: 16,
        layers: 8,
        width: 64,
        learning_rate: 1e-2,
        batch: 512,
        steps_per_frame: 8,
        seed: 1,
        ..Settings::default()
    };
    let mut h = harness(settings);
    h.run_steps(2);
    h.get_by_label("Play").click();
    for _ in 0..40 {
        h.run_steps(1);
        if matches!(session(&h).status, Status::Stopped(_)) {
            break;
        }
    }
    let s = session(&h);
    let Status::Stopped(reason) = &s.status else {
        panic!(
            "a run that left its first loss far behind was not stopped ({} steps, last loss {:?})",
            s.steps_done(),
            s.losses.last()
        );
    };
    assert!(reason.contains("diverged"), "{reason}");
    assert!(
        reason.contains(
            "Likely cause: the learning rate, 0.01, is above the 0.003 that suits a coupling flow"
        ),
        "{reason}"
    );
    assert!(reason.contains("a stack of 16 is deep"), "{reason}");
    let stopped_at = s.steps_done();
    eprintln!("stopped at step {stopped_at}: {reason}");
    screenshot(&mut h, "behaviour-diverged");
    // thrown off from its first steps, its last good state is where it started
    h.get_by_label_contains("Go on from step 0 at half the learning rate")
        .click();
    h.run_steps(1);
    let s = session(&h);
    assert_eq!(s.settings.learning_rate, 5e-3, "the rate is halved");
    assert_eq!(h.state().playground().settings().learning_rate, 5e-3);
    assert_eq!(s.status, Status::Running);
    assert!(s.steps_done() < stopped_at, "back to the start");
    assert!(query(&h).contains("lr=0.005"), "{}", query(&h));
}

#[test]
fn a_coupling_flow_takes_the_settings_that_suit_it() {
    let mut settings = small("moons");
    settings.stack = 16;
    settings.learning_rate = 1e-2;
    let mut h = harness(settings);
    h.run_steps(2);
    open_menu(&mut h, "flow");
    h.run_steps(2);
    h.get_by_label("coupling").click();
    h.run_steps(3);
    let s = session(&h);
    assert_eq!(s.settings.flow, FlowKind::Coupling);
    assert_eq!((s.settings.stack, s.settings.learning_rate), (4, 3e-3));
    h.get_by_label_contains("A coupling flow trains well with a stack of 4");
}

#[test]
fn the_address_keeps_the_theme_and_the_text_size() {
    let mut h = harness(small("moons"));
    h.run_steps(2);
    h.get_by_label("light").click();
    h.run_steps(2);
    h.get_by_label("A+").click();
    h.run_steps(2);
    let q = query(&h);
    assert!(q.contains("theme=light") && q.contains("zoom=1.25"), "{q}");
    // a malformed link names what it ignored and why
    let (_, ignored) = Settings::from_query("lr=1&stack=banana&zoom=9");
    assert_eq!(
        ignored,
        [
            "lr=1 (out of range: 0.0001 to 0.1)",
            "stack=banana (not a number)",
            "zoom=9 (out of range: 0.75 to 2.5)"
        ]
    );
}

#[test]
fn a_phone_screen_shows_every_view_one_above_the_other() {
    let mut h = harness_sized(small("rings"), [390.0, 844.0]);
    h.run_steps(3);
    let rects = h.state().playground().view_rects().to_vec();
    let rect = |name: &str| {
        rects
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .unwrap_or_else(|| panic!("no {name} view on a phone: {rects:?}"))
    };
    let (density, target, loss) = (rect("density"), rect("target"), rect("loss"));
    for (name, r) in [("density", density), ("target", target), ("loss", loss)] {
        assert!(
            r.left() >= 0.0 && r.right() <= 390.0 && r.width() > 200.0,
            "the {name} view does not fit across the phone: {r:?}"
        );
    }
    assert!(target.top() >= density.bottom() && loss.top() >= target.bottom());
    // the controls are in a drawer
    h.get_by_label("Controls").click();
    h.run_steps(4);
    assert!(
        h.get_all_by_label("target").next().is_some(),
        "the drawer's controls"
    );
    screenshot(&mut h, "behaviour-phone");
}

#[test]
fn the_lab_starts_again_at_once_at_a_preset_and_its_address_follows() {
    let mut h = harness(small("moons"));
    h.run_steps(2);
    h.get_by_label("phi^4 lattice").click();
    h.run_steps(3);
    let lab = h.state().lab().expect("the lab");
    assert_eq!(lab.settings.lambda, LabSettings::default().lambda);
    h.get_by_label("broken point").click();
    h.run_steps(3);
    let lab = h.state().lab().expect("the lab");
    assert_eq!(lab.settings.lambda, 2.0);
    assert!(query(&h).contains("lambda=2"), "{}", query(&h));
    assert!(lab.title().contains("step 0"));
}

#[test]
fn the_lab_architecture_builds_the_chosen_conditioner_and_site_map() {
    let mut h = harness(small("moons"));
    h.run_steps(2);
    h.get_by_label("phi^4 lattice").click();
    h.run_steps(3);
    h.get_by_label("architecture").click();
    h.run_steps(3);
    // the default puts an affine map first; the box takes it away
    assert!(
        h.state().lab().expect("the lab").runs[0]
            .label
            .contains("affine+")
    );
    h.get_by_label("affine map first").click();
    h.run_steps(3);
    h.get_by_label("plain conditioner (1 -> c -> c -> out)")
        .click();
    h.run_steps(3);
    let lab = h.state().lab().expect("the lab");
    assert!(!lab.settings.affine_first && lab.settings.plain);
    // the run on screen is the new design, started at once
    let run = &lab.runs[0];
    assert!(!run.label.contains("affine+"), "{}", run.label);
    assert!(lab.title().contains("step 0"), "{}", lab.title());
    let q = query(&h);
    assert!(q.contains("plain=1") && q.contains("affine_first=0"), "{q}");
}

#[test]
fn a_click_is_answered_in_its_own_frame_before_any_training() {
    let mut h = harness(small("rings"));
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(3);
    let before = session(&h).steps_done();
    assert!(before > 0);
    // the harness runs a frame for each event of a click: the pointer moving
    // there (a frame like any other: 8 steps), the press and the release (no
    // training: the page answers them at once)
    h.get_by_label("linear").click();
    h.run_steps(1);
    assert_eq!(session(&h).steps_done(), before + 8);
    // the next frame trains as before
    h.run_steps(1);
    assert_eq!(session(&h).steps_done(), before + 16);
}

#[test]
fn a_window_just_wider_than_a_phone_keeps_the_views_side_by_side() {
    // 900 points wide: the wide layout (controls at the left), so the views
    // stand side by side and both fit in the window, which does not scroll
    let mut h = harness_sized(small("rings"), [900.0, 640.0]);
    h.run_steps(3);
    let rects = h.state().playground().view_rects().to_vec();
    let rect = |name: &str| {
        rects
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .unwrap_or_else(|| panic!("no {name} view: {rects:?}"))
    };
    let (density, target) = (rect("density"), rect("target"));
    assert!(target.left() >= density.right(), "{density:?} {target:?}");
    assert!(
        target.bottom() <= 640.0 && target.right() <= 900.0,
        "{target:?}"
    );
}
