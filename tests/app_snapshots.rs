//! Both pages opened paused, pictured on lavapipe and compared with the images
//! stored in `tests/snapshots/` (with a tolerance for rendering noise), as
//! egui's own demo app does: a change of what the page shows is seen, not only
//! a change of behaviour. After an intended change of the pages, run
//! `UPDATE_SNAPSHOTS=1 cargo test --test app_snapshots`, look at the new
//! pictures, and commit them.
#![cfg(all(feature = "app", not(target_arch = "wasm32")))]

use egui_kittest::{Harness, SnapshotOptions};
use flowplay::app::PlaygroundApp;
use flowplay::app::lab::settings::LabSettings;
use flowplay::app::playground::settings::Settings;

/// The app as a visitor's first frames show it, on two CPU threads (the label
/// names them) so the picture does not depend on the machine's cores.
fn app() -> Harness<'static, PlaygroundApp> {
    Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(|_cc| PlaygroundApp::with_settings(Settings::default()).with_cpu_threads(2))
}

/// egui's default per-pixel threshold, and a handful of pixels for rendering
/// noise: a changed character of text already differs in more.
fn tolerance() -> SnapshotOptions {
    SnapshotOptions::new().threshold(0.6).max_failed_pixels(16)
}

#[test]
fn the_playground_opens_paused_as_pictured() {
    let mut h = app();
    h.run_steps(4);
    h.snapshot_options("playground-paused", &tolerance());
}

#[test]
fn the_phi4_lab_opens_paused_as_pictured() {
    let mut h = app();
    h.run_steps(2);
    h.state_mut().open_lab(Some(LabSettings::default()));
    h.run_steps(4);
    h.snapshot_options("phi4-lab-paused", &tolerance());
}
