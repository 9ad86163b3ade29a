//! What the app's kittest files share: saving a screenshot to look at.
#![allow(dead_code)] // each test file uses its part

use egui_kittest::Harness;
use flowplay::app::PlaygroundApp;

/// Renders the app and saves it as `target/screenshots/<name>.png`.
pub fn screenshot(harness: &mut Harness<'static, PlaygroundApp>, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    let image = harness.render().expect("the app renders");
    image
        .save(dir.join(format!("{name}.png")))
        .expect("PNG written");
}
