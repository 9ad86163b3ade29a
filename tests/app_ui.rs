//! The playground's panels driven for real with egui's kittest harness,
//! rendered on lavapipe: the page opens paused with its controls and views,
//! Step / Play / Pause train the model, a bad learning rate stops with a
//! message, and screenshots land in target/screenshots/ to be looked at.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flowplay::app::Playground;
use flowplay::app::session::Status;
use flowplay::app::settings::Settings;
use flowplay::flow::FlowKind;

fn harness(settings: Settings) -> Harness<'static, Playground> {
    Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(move |_cc| Playground::with_settings(settings))
}

fn screenshot(harness: &mut Harness<'static, Playground>, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    let image = harness.render().expect("the app renders");
    image
        .save(dir.join(format!("{name}.png")))
        .expect("PNG written");
}

fn small(target: &str, flow: FlowKind) -> Settings {
    Settings {
        target: target.into(),
        flow,
        stack: 8,
        layers: 4,
        width: 32,
        batch: 256,
        steps_per_frame: 8,
        ..Settings::default()
    }
}

fn steps(harness: &Harness<'static, Playground>) -> usize {
    harness.state().session().map_or(0, |s| s.steps_done())
}

#[test]
fn the_page_opens_paused_with_its_controls_and_views() {
    let mut h = harness(Settings::default());
    h.run_steps(3);
    for label in ["Play", "Step", "Reset", "Copy link", "model density q(x)"] {
        h.get_by_label(label);
    }
    h.get_by_label_contains("parameters:");
    h.get_by_label_contains("target: spiral");
    assert_eq!(steps(&h), 0);
    screenshot(&mut h, "app-opened");
}

#[test]
fn step_play_and_pause_train_the_model() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Step").click();
    h.run_steps(2);
    assert_eq!(steps(&h), 1);
    h.get_by_label("Play").click();
    h.run_steps(40);
    let trained = steps(&h);
    assert!(trained > 40, "only {trained} steps");
    let losses = &h.state().session().unwrap().losses;
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    assert!(
        mean(&losses[losses.len() - 20..]) < mean(&losses[..20]),
        "the loss did not fall"
    );
    h.get_by_label("Pause").click();
    h.run_steps(2);
    let paused = steps(&h);
    h.run_steps(5);
    assert_eq!(steps(&h), paused);
    screenshot(&mut h, "app-rings-radial");
}

#[test]
fn a_coupling_flow_trains_on_the_checkerboard() {
    let mut h = harness(small("checkerboard", FlowKind::Coupling));
    h.run_steps(2);
    h.key_press(eframe::egui::Key::Space);
    h.run_steps(30);
    assert!(steps(&h) > 30);
    screenshot(&mut h, "app-checkerboard-coupling");
}

#[test]
fn a_step_that_overflows_stops_training_with_a_message() {
    let mut settings = small("moons", FlowKind::Radial);
    settings.family = "sinh".into();
    // far beyond the slider's range (a link cannot ask for it either): Adam
    // moves every raw parameter by ~50 a step, and sinh's exponentials overflow
    settings.learning_rate = 50.0;
    settings.stack = 32;
    let mut h = harness(settings);
    h.get_by_label("Play").click();
    h.run_steps(60);
    let session = h.state().session().unwrap();
    match &session.status {
        Status::Stopped(reason) => assert!(reason.contains("learning rate"), "{reason}"),
        other => panic!(
            "training at lr 1 did not stop: {other:?} after {} steps",
            session.steps_done()
        ),
    }
    // the app keeps working: the message is shown and reset starts over
    h.get_by_label_contains("or restore the last good state");
    h.get_by_label("Reset").click();
    h.run_steps(2);
    assert_eq!(steps(&h), 0);
}

/// With a GPU (lavapipe here) the run trains there: the backend says so, the
/// loss falls, and the views come from the GPU kernels.
#[test]
fn the_run_trains_on_the_gpu_when_there_is_one() {
    let mut h = Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(|_cc| {
            let mut app = Playground::with_settings(small("rings", FlowKind::Radial));
            app.find_gpu();
            app
        });
    h.run_steps(3);
    let session = h.state().session().unwrap();
    assert!(session.on_gpu(), "backend: {}", session.backend);
    h.get_by_label_contains("backend: GPU");
    let before = session.picture_version;
    h.get_by_label("Play").click();
    h.run_steps(40);
    let session = h.state().session().unwrap();
    assert!(
        session.steps_done() > 40,
        "only {} steps",
        session.steps_done()
    );
    assert!(
        session.picture_version > before,
        "the views were not redrawn"
    );
    let losses = &session.losses;
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    assert!(
        mean(&losses[losses.len() - 20..]) < mean(&losses[..20]),
        "the loss did not fall"
    );
    screenshot(&mut h, "app-rings-radial-gpu");
}

#[test]
fn a_lesson_opens_its_experiment_and_says_what_to_watch() {
    let mut h = harness(small("moons", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("lesson").click();
    h.run_steps(2);
    h.get_by_label("Radial flow on rings").click();
    h.run_steps(10);
    let session = h.state().session().unwrap();
    assert_eq!(session.settings.target, "rings");
    assert_eq!(session.settings.flow, FlowKind::Radial);
    assert_eq!(session.status, Status::Running);
    assert!(session.steps_done() > 0);
    h.get_by_label_contains("watch the grid's circles crowd onto the rings");
    screenshot(&mut h, "app-lesson-rings");
}

#[test]
fn the_light_theme_is_one_click_away() {
    let mut h = harness(small("moons", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("light").click();
    h.run_steps(3);
    assert_eq!(h.ctx.theme(), eframe::egui::Theme::Light);
    screenshot(&mut h, "app-light");
    h.get_by_label("dark").click();
    h.run_steps(3);
    assert_eq!(h.ctx.theme(), eframe::egui::Theme::Dark);
}
