//! The playground's panels driven for real with egui's kittest harness,
//! rendered on lavapipe: the page opens paused with its controls and views,
//! Step / Play / Pause train the model, a bad learning rate stops with a
//! message, and screenshots land in target/screenshots/ to be looked at.
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

/// The playground may train a second a frame, so a frame always takes its
/// full steps per frame however busy the machine (the lab keeps the page's
/// budget: it trains as long as its budget lasts).
const BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

fn harness(settings: Settings) -> Harness<'static, PlaygroundApp> {
    harness_with(settings, |_| {})
}

/// The app with `prepare` done to it before its first frame.
fn harness_with(
    settings: Settings,
    prepare: impl FnOnce(&mut PlaygroundApp) + 'static,
) -> Harness<'static, PlaygroundApp> {
    Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(move |_cc| {
            let mut app = PlaygroundApp::with_settings(settings).with_train_budget(BUDGET);
            prepare(&mut app);
            app
        })
}

/// The app with the GPU it finds (lavapipe here), as it starts for a user.
fn found_gpu_harness(settings: Settings) -> Harness<'static, PlaygroundApp> {
    harness_with(settings, PlaygroundApp::find_gpu)
}

/// The app on the GPU it finds (lavapipe, a software adapter, so chosen by
/// hand as a user may).
fn gpu_harness(settings: Settings) -> Harness<'static, PlaygroundApp> {
    harness_with(settings, |app| {
        app.find_gpu();
        app.choose_gpu(true);
    })
}

/// A software adapter (lavapipe here) is offered, not chosen: the playground
/// starts on the CPU and says why, and "train on the GPU" moves the run there
/// (the address then keeps the choice).
#[test]
fn an_emulated_gpu_is_offered_not_chosen() {
    use flowplay::app::host::CpuReason;
    let mut h = found_gpu_harness(small("rings", FlowKind::Radial));
    h.run_steps(3);
    let session = h.state().playground().session().unwrap();
    assert!(!session.on_gpu(), "backend: {}", session.device());
    assert_eq!(session.cpu_reason(), Some(&CpuReason::SoftwareAdapter));
    assert!(!h.state().playground().prefers_gpu());
    h.get_by_label_contains("the GPU is emulated in software");
    h.get_by_label_contains("is emulated in software: the CPU trains faster here");
    h.get_by_label("train on the GPU").click();
    h.run_steps(3);
    let session = h.state().playground().session().unwrap();
    assert!(session.on_gpu(), "backend: {}", session.device());
    assert!(h.state().query(&h.ctx).contains("gpu=on"));
}

/// The app trains on the very device it renders with (the harness's
/// lavapipe device): drawing and training side by side on it raise no error,
/// and when that device is lost the run moves to the CPU from where it was.
#[test]
fn the_playground_trains_on_the_device_it_draws_with() {
    use std::sync::{Arc, Mutex};
    let render: Arc<Mutex<Option<eframe::wgpu::Device>>> = Arc::default();
    let seen = Arc::clone(&render);
    let mut h = Harness::builder()
        .with_size([1280.0, 800.0])
        .wgpu()
        .build_eframe(move |cc| {
            let mut app = PlaygroundApp::with_settings(small("rings", FlowKind::Radial))
                .with_train_budget(BUDGET);
            app.use_render_device(cc.wgpu_render_state.as_ref());
            app.choose_gpu(true);
            let state = cc
                .wgpu_render_state
                .as_ref()
                .expect("kittest renders with wgpu");
            *seen.lock().unwrap() = Some(state.device.clone());
            app
        });
    h.run_steps(3);
    h.get_by_label("Play").click();
    train_with_redraws(&mut h, 3);
    let session = h.state().playground().session().unwrap();
    assert!(session.on_gpu(), "backend: {}", session.device());
    let trained = session.steps_done();
    assert!(trained > 20, "only {trained} steps");
    let ctx = session.gpu_context().unwrap().clone();
    assert_eq!(ctx.error(), None);
    // the model view is drawn on the GPU: a heat map of at least 512
    // texels a side, the grid and samples from its vertex buffers
    let views = session
        .gpu_views()
        .expect("the view drawn on the GPU")
        .clone();
    assert!(views.side() >= 512, "{} texels", views.side());
    assert!(views.texture_id().is_some(), "never drawn");
    assert!(session.picture.peak.is_some(), "no peak for the colour bar");
    assert!(session.picture.samples.is_empty() && session.picture.lines.is_empty());
    // what crosses back to the CPU while training: each task's losses, and
    // every 300 ms the density on the metrics' grid, its peak and the
    // parameters; never the heat map (1 MB), the samples or the grid
    let (bytes, full, trained, frames) = (
        ctx.bytes_read_back(),
        session.full_pictures(),
        session.steps_done(),
        30,
    );
    h.run_steps(frames);
    let session = h.state().playground().session().unwrap();
    let read = ctx.bytes_read_back() - bytes;
    let full = (session.full_pictures() - full) as u64;
    let losses = 4 * (session.steps_done() - trained) as u64;
    // (the parameters' buffer may be padded: 64 bytes of slack)
    let per_full = (96 * 96 + session.n_params + 1) as u64 * 4 + 64;
    println!(
        "read back over {frames} training frames with the view drawn on the GPU: {read} bytes ({full} full pictures of {per_full} bytes, {losses} bytes of losses)"
    );
    assert!(full < frames as u64, "every task was a full one");
    // (1 kB of slack: a task's losses may be read before its steps count;
    // the samples alone would be 18 kB, the grid 80 kB)
    assert!(
        read <= full * per_full + losses + 1024,
        "{read} bytes read back"
    );
    // paused, the view is drawn once more from the model as it stands:
    // the grid's points are the CPU's flow of the latent grid
    h.get_by_label("Pause").click();
    h.run_steps(4);
    let session = h.state().playground().session().unwrap();
    let (_, model) = session.model().expect("the paused model");
    let geometry = flowplay::app::playground::picture::radial_geometry(&model);
    let latent = flowplay::app::playground::gpu_overlay::latent_grid(geometry);
    let (samples, grid) = pollster::block_on(views.overlay().pushed_async()).expect("read back");
    assert_eq!(grid.len(), 3 * latent.len());
    assert!(samples.iter().all(|v| v.is_finite()) && samples.len() == 3 * 1500);
    let mut x = vec![0.0; latent.points.len()];
    let mut ld = vec![0.0; latent.len()];
    model.as_flow().x_from_z(&latent.points, &mut x, &mut ld);
    for (i, gpu) in grid.chunks(3).enumerate() {
        let cpu = [x[2 * i], x[2 * i + 1], ld[i]];
        for (g, c) in gpu.iter().zip(cpu) {
            assert!(
                (*g as f64 - c).abs() <= 1e-3 * c.abs().max(1.0),
                "grid point {i}: {gpu:?} vs {cpu:?}"
            );
        }
    }
    screenshot(&mut h, "app-one-device");
    // playing, the device the harness draws with goes: so does the one
    // training
    h.get_by_label("Play").click();
    h.run_steps(3);
    let before = steps(&h);
    let drawn_with = render.lock().unwrap().clone().expect("the render device");
    drawn_with.destroy();
    h.run_steps(5);
    let session = h.state().playground().session().unwrap();
    assert!(
        !session.on_gpu(),
        "still on the lost GPU: {}",
        session.device()
    );
    let resumed = session.steps_done();
    assert!(
        resumed > 0 && resumed <= before + 80,
        "resumed at {resumed}"
    );
    h.get_by_label_contains("The GPU device was lost");
    h.run_steps(10);
    assert!(steps(&h) > resumed, "training stopped on the CPU");
}

/// Runs `rounds` batches of frames with pauses between them, so the views
/// (and the metrics with them), which redraw on a clock, are redrawn.
fn train_with_redraws(h: &mut Harness<'static, PlaygroundApp>, rounds: usize) {
    for _ in 0..rounds {
        h.run_steps(10);
        std::thread::sleep(std::time::Duration::from_millis(320));
    }
}

fn small(target: &'static str, flow: FlowKind) -> Settings {
    Settings {
        target: TargetChoice::Preset(target),
        flow,
        stack: 8,
        layers: 4,
        width: 32,
        batch: 256,
        steps_per_frame: 8,
        ..Settings::default()
    }
}

fn steps(harness: &Harness<'static, PlaygroundApp>) -> usize {
    harness
        .state()
        .playground()
        .session()
        .map_or(0, |s| s.steps_done())
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
    let losses = &h.state().playground().session().unwrap().losses;
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
    settings.family = Family::Sinh;
    // far beyond the slider's range (a link cannot ask for it either): Adam
    // moves every raw parameter by ~50 a step, and sinh's exponentials overflow
    settings.learning_rate = 50.0;
    settings.stack = 32;
    let mut h = harness(settings);
    h.get_by_label("Play").click();
    h.run_steps(60);
    let session = h.state().playground().session().unwrap();
    match &session.status {
        Status::Stopped(reason) => assert!(reason.contains("learning rate"), "{reason}"),
        other => panic!(
            "training at lr 1 did not stop: {other:?} after {} steps",
            session.steps_done()
        ),
    }
    // the app keeps working: the message is shown with the way on, and
    // reset starts over
    h.get_by_label_contains("Go on from step");
    h.get_by_label("Reset").click();
    h.run_steps(2);
    assert_eq!(steps(&h), 0);
}

/// With a GPU (lavapipe here) the run trains there: the backend says so, the
/// loss falls, and the views come from the GPU kernels.
#[test]
fn the_run_trains_on_the_gpu_when_there_is_one() {
    let mut h = gpu_harness(small("rings", FlowKind::Radial));
    h.run_steps(3);
    let session = h.state().playground().session().unwrap();
    assert!(session.on_gpu(), "backend: {}", session.device());
    h.get_by_label_contains("backend: GPU");
    let before = session.picture_version;
    h.get_by_label("Play").click();
    h.run_steps(40);
    let session = h.state().playground().session().unwrap();
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
    h.get_by_label("Lessons").click();
    h.run_steps(2);
    h.get_by_label("5. Radial flows on radial data").click();
    h.run_steps(10);
    let session = h.state().playground().session().unwrap();
    assert_eq!(session.settings.target, TargetChoice::Preset("rings"));
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

/// A file dropped onto the window, as the harness hands it to the app.
#[derive(Debug)]
struct Dropped {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
}

impl eframe::egui::DroppedFile for Dropped {
    fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        Ok(self.bytes.clone())
    }
}

fn drop_file(h: &mut Harness<'static, PlaygroundApp>, name: &str, bytes: Vec<u8>) {
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped {
            path: name.into(),
            bytes,
        }));
    h.run_steps(3);
}

/// A white picture with a black ring: the ring (the rarer tone) is the ink.
fn ring_png() -> Vec<u8> {
    let picture = image::GrayImage::from_fn(64, 64, |x, y| {
        let r = ((x as f32 - 32.0).powi(2) + (y as f32 - 32.0).powi(2)).sqrt();
        image::Luma([if (r - 20.0).abs() < 3.0 { 0 } else { 255 }])
    });
    let mut bytes = std::io::Cursor::new(Vec::new());
    picture
        .write_to(&mut bytes, image::ImageFormat::Png)
        .expect("PNG encoded");
    bytes.into_inner()
}

#[test]
fn a_dropped_image_becomes_the_target_and_a_bad_file_says_why() {
    let mut h = harness(small("moons", FlowKind::Radial));
    h.run_steps(2);
    drop_file(&mut h, "notes.png", b"not an image at all".to_vec());
    h.get_by_label_contains("notes.png was not used: not a PNG or JPEG image");
    assert_eq!(
        h.state().playground().session().unwrap().target.name(),
        "moons"
    );
    drop_file(&mut h, "ring.png", ring_png());
    h.get_by_label_contains("ring.png: its dark parts are the density to learn");
    let session = h.state().playground().session().unwrap();
    assert_eq!(session.target.name(), "image");
    // the target's samples lie on the ring (radius 20 of 64 pixels over 7 units)
    let on_ring = session
        .target_samples
        .iter()
        .filter(|p| (p.length() - 20.0 * 7.0 / 64.0).abs() < 0.5)
        .count();
    assert!(on_ring * 10 > session.target_samples.len() * 9, "{on_ring}");
    h.get_by_label("Play").click();
    h.run_steps(20);
    assert!(steps(&h) > 10);
    screenshot(&mut h, "app-image-target");
}

#[test]
fn a_drawing_becomes_the_target() {
    let mut h = harness(small("moons", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Draw").click();
    h.run_steps(3);
    let label = h
        .get_by_label_contains("Paint where the mass should be")
        .rect();
    // a stroke across the canvas just below the label
    let start = eframe::egui::pos2(label.left() + 60.0, label.bottom() + 100.0);
    h.drag_at(start);
    h.run_steps(1);
    for k in 1..=20 {
        h.hover_at(start + eframe::egui::vec2(8.0 * k as f32, 4.0 * k as f32));
        h.run_steps(1);
    }
    h.drop_at(start + eframe::egui::vec2(160.0, 80.0));
    h.run_steps(2);
    screenshot(&mut h, "app-drawing");
    h.get_by_label("Train on this").click();
    h.run_steps(20);
    let session = h.state().playground().session().unwrap();
    assert_eq!(session.target.name(), "image");
    assert_eq!(session.status, Status::Running);
    assert!(session.steps_done() > 5);
}

#[test]
fn a_model_exports_and_imports_and_views_save_as_png() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("app-files");
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_current_dir(&dir).unwrap(); // where native saves land
    let mut h = harness(small("rings", FlowKind::RadialFourier));
    h.run_steps(2);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(1);
    }
    h.get_by_label("Export model").click();
    h.run_steps(2);
    let file = dir.join("flowplay-rings-step3.json");
    h.get_by_label_contains("flowplay-rings-step3.json (flowplay eval reads it)");
    let exported = std::fs::read(&file).unwrap();
    let trained = h.state().playground().session().unwrap().model().unwrap().1;
    // a fresh page takes the file in: same flow, same parameters, paused at
    // the step it was exported at
    let mut fresh = harness(small("moons", FlowKind::Coupling));
    fresh.run_steps(2);
    drop_file(&mut fresh, "flowplay-rings-step3.json", exported);
    fresh.get_by_label_contains("Imported flowplay-rings-step3.json");
    let session = fresh.state().playground().session().unwrap();
    assert_eq!(session.settings.target, TargetChoice::Preset("rings"));
    assert_eq!(session.settings.flow, FlowKind::RadialFourier);
    assert_eq!(session.steps_done(), 3);
    let imported = session.model().unwrap().1;
    assert_eq!(
        imported.as_flow().params(),
        trained.as_flow().params(),
        "the imported parameters differ"
    );
    // the same model as a Python script for bijx, which checks itself there
    // (run when the test command's bijx is at hand: tests/bijx_export.rs)
    h.get_by_label("Export as Python (bijx)").click();
    h.run_steps(2);
    h.get_by_label_contains("flowplay-rings-step3-bijx.py (run it with Python and bijx 1.3.2");
    let script = std::fs::read_to_string(dir.join("flowplay-rings-step3-bijx.py")).unwrap();
    assert!(script.contains("trained in the playground on rings for 3 steps"));
    assert!(script.contains("An angle-dependent radial flow"));
    if let Ok(python) = std::env::var("BIJX_PYTHON") {
        let out = std::process::Command::new(python)
            .arg(dir.join("flowplay-rings-step3-bijx.py"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("bijx agrees with flowplay"), "{stdout}");
    }
    // a PNG of the density view
    h.get_by_label("density").click();
    h.run_steps(5);
    h.get_by_label_contains("flowplay-density-step3.png");
    let png = image::open(dir.join("flowplay-density-step3.png")).unwrap();
    assert!(png.width() > 100 && png.width() == png.height());
}

/// The plots have axes and, under the pointer, a readout of the nearest
/// curve's value; the loss plot a legend of its curves.
#[test]
fn the_plots_read_out_the_value_under_the_pointer() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(20);
    h.get_by_label("Pause").click();
    h.run_steps(2);
    let title = h.get_by_label_contains("-log q of training batches").rect();
    // the middle of the loss plot, under its title
    let at = eframe::egui::pos2(title.center().x, title.bottom() + 60.0);
    // (egui shows a tooltip once the pointer has rested a moment)
    for _ in 0..60 {
        h.hover_at(at);
        h.run_steps(1);
    }
    screenshot(&mut h, "app-plot-readout");
    // the nearest curve's value, or the value under the pointer
    h.get_by_label_contains("at step ");
}

/// Side by side: three designs train together for the same steps and fill
/// the table (parameters, held-out NLL, steps, steps/s, state).
#[test]
fn side_by_side_trains_three_designs_and_fills_the_table() {
    use eframe::egui::accesskit::Role;
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Side by side").click();
    h.run_steps(2);
    h.get_by_label("three families (spiral)").click();
    h.run_steps(2);
    h.get_by_role_and_label(Role::SpinButton, "steps each")
        .set_value_accesskit(40.0);
    h.run_steps(2);
    h.get_by_label("Start").click();
    for _ in 0..100 {
        h.run_steps(1);
        let c = h.state().playground().comparison().unwrap();
        if !c.running() {
            break;
        }
    }
    let comparison = h.state().playground().comparison().unwrap();
    assert_eq!(comparison.budget, 40);
    assert_eq!(comparison.runs.len(), 3);
    for run in &comparison.runs {
        let s = &run.session;
        assert_eq!(s.settings.target, TargetChoice::Preset("spiral"));
        assert_eq!(s.steps_done(), 40, "{}", run.design.label());
        assert_eq!(comparison.state(run), "done");
        let row = flowplay::app::playground::compare::table_row(comparison, run);
        assert_eq!(row.len(), 6, "{row:?}");
        assert!(row[2].parse::<f64>().is_ok(), "held-out NLL {row:?}");
    }
    let families: Vec<String> = comparison.runs.iter().map(|r| r.design.label()).collect();
    assert_eq!(
        families,
        [
            "radial-fourier cubic_rational x16",
            "radial-fourier sinh x16",
            "radial-fourier cubic x16"
        ]
    );
    // the table is on screen, one row a design
    h.get_by_label("held-out NLL");
    for label in &families {
        assert!(
            h.query_all_by_label(label).count() >= 2,
            "{label}: view and row"
        );
    }
    screenshot(&mut h, "app-side-by-side");
}

/// Side by side at a learning rate where the affine coupling flow diverges:
/// it stops alone, with the reason, and the analytic one trains to the end.
#[test]
fn a_diverging_design_stops_alone() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Side by side").click();
    h.run_steps(2);
    h.get_by_label("affine vs analytic coupling (moons, lr 0.01)")
        .click();
    h.run_steps(2);
    h.get_by_label("Start").click();
    for _ in 0..400 {
        h.run_steps(1);
        if !h.state().playground().comparison().unwrap().running() {
            break;
        }
    }
    let comparison = h.state().playground().comparison().unwrap();
    let (affine, analytic) = (&comparison.runs[0], &comparison.runs[1]);
    assert!(
        matches!(&affine.session.status, Status::Stopped(why) if why.contains("diverged")),
        "{:?} at step {}",
        affine.session.status,
        affine.session.steps_done()
    );
    assert!(comparison.state(affine).starts_with("diverged at step"));
    let why = flowplay::app::playground::compare::reason(affine).unwrap();
    assert!(why.contains("learning rate"), "{why}");
    assert!(analytic.rate > 0.0);
    assert_eq!(analytic.session.steps_done(), comparison.budget);
    assert_eq!(comparison.state(analytic), "done");
    let last = analytic.session.losses.last().copied().unwrap();
    assert!(last.is_finite(), "{last}");
    screenshot(&mut h, "app-side-by-side-diverged");
}

/// A paused run on the CPU redraws its density on a finer grid, as fine as
/// the flow's estimated cost allows (a radial flow of 8 maps: 256 x 256; a
/// coupling flow of 4 x 32: 128 x 128), while a training one draws the
/// training size; the finer picture is the model's exact log q at its grid's
/// points.
#[test]
fn a_paused_view_is_redrawn_finer() {
    use flowplay::app::playground::picture::grid_points;
    use flowplay::train::metrics::log_q;
    for (flow, paused, training) in [(FlowKind::Radial, 256, 96), (FlowKind::Coupling, 128, 48)] {
        let mut h = harness(small("rings", flow));
        h.run_steps(3);
        let picture = &h.state().playground().session().unwrap().picture;
        assert_eq!(picture.n, paused, "{flow:?} paused");
        let (_, model) = picture.model.clone().unwrap();
        let exact = log_q(model.as_flow(), &grid_points(paused));
        let worst = exact
            .iter()
            .zip(&picture.log_q)
            .map(|(a, &b)| (a - b as f64).abs())
            .fold(0.0, f64::max);
        assert!(
            worst < 1e-3,
            "{flow:?}: the finer density is off by {worst}"
        );
        h.get_by_label("Play").click();
        h.run_steps(3);
        let session = h.state().playground().session().unwrap();
        assert!(session.steps_done() > 0);
        assert_eq!(session.picture.n, training, "{flow:?} training");
        h.get_by_label("Pause").click();
        h.run_steps(3);
        let session = h.state().playground().session().unwrap();
        assert_eq!(session.picture.n, paused, "{flow:?} paused again");
        if flow == FlowKind::Coupling {
            screenshot(&mut h, "app-paused-sharp-coupling");
        }
    }
}

/// Layer by layer: at k = N the window shows the model's own density (the
/// main view's pixels), at k = 0 the latent normal, and "Morph" plays k from
/// 0 to N; for a radial stack and for coupling layers.
#[test]
fn layer_by_layer_runs_from_the_latent_normal_to_the_model() {
    use flowplay::app::playground::picture::grid_points;
    use flowplay::stats::log_normal;
    for (flow, maps) in [(FlowKind::Radial, 8), (FlowKind::Coupling, 4)] {
        let mut h = harness(small("rings", flow));
        h.run_steps(2);
        for _ in 0..3 {
            h.get_by_label("Step").click();
            h.run_steps(1);
        }
        h.get_by_label("Layer by layer").click();
        h.run_steps(3);
        let playground = h.state().playground();
        let layers = playground.layers().expect("the window is open");
        assert_eq!(layers.scrubber.n(), maps, "{flow:?}");
        assert_eq!(
            layers.scrubber.k, maps,
            "{flow:?}: it opens on the whole model"
        );
        let main = &playground.session().unwrap().picture;
        let at_n = layers.picture().expect("the picture at k = N");
        assert_eq!(at_n.n, main.n);
        assert_eq!(at_n.log_q, main.log_q, "{flow:?}: k = N is the main view");
        h.get_by_label_contains(&format!("k = {maps}: all {maps}"));
        screenshot(&mut h, &format!("app-layers-{}", flow.name()));

        let slider = h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "maps applied");
        slider.set_value_accesskit(0.0);
        h.run_steps(3);
        let layers = h.state().playground().layers().unwrap();
        assert_eq!(layers.scrubber.k, 0);
        let latent = layers.picture().expect("the picture at k = 0");
        let normal: Vec<f32> = grid_points(latent.n)
            .chunks(2)
            .map(|p| log_normal(p) as f32)
            .collect();
        assert_eq!(latent.log_q, normal, "{flow:?}: k = 0 is N(0, I)");
        h.get_by_label_contains("k = 0: the latent space");

        // an intermediate cut differs from both ends
        slider_to(&mut h, 2.0);
        let middle = h
            .state()
            .playground()
            .layers()
            .unwrap()
            .picture()
            .unwrap()
            .log_q
            .clone();
        assert_ne!(middle, normal);
        assert_ne!(middle, main_log_q(&h));

        h.get_by_label("Morph").click();
        h.run_steps(1);
        assert!(h.state().playground().layers().unwrap().scrubber.morphing());
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            h.run_steps(1);
            let layers = h.state().playground().layers().unwrap();
            seen.insert(layers.scrubber.k);
            if !layers.scrubber.morphing() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let layers = h.state().playground().layers().unwrap();
        assert!(!layers.scrubber.morphing(), "the morph ends");
        assert_eq!(layers.scrubber.k, maps, "and ends on the model");
        assert!(seen.len() >= 3, "{flow:?}: it passed through {seen:?}");
    }
}

fn slider_to(h: &mut Harness<'static, PlaygroundApp>, k: f64) {
    h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "maps applied")
        .set_value_accesskit(k);
    h.run_steps(3);
}

fn main_log_q(h: &Harness<'static, PlaygroundApp>) -> Vec<f32> {
    h.state()
        .playground()
        .session()
        .unwrap()
        .picture
        .log_q
        .clone()
}

#[test]
fn the_explorer_plots_a_map_and_edits_a_paused_radial_flow_by_hand() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Bijection explorer").click();
    h.run_steps(3);
    for label in ["f(x)", "inverse f^-1(x)", "f(x) - x", "log f'(x)"] {
        h.get_by_label(label);
    }
    h.get_by_label_contains("radius map r -> f(r)");
    screenshot(&mut h, "app-explorer");
    // move the radial flow's centre by hand: the model and its views follow
    let before = h.state().playground().session().unwrap().picture_version;
    let centre = h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "centre x");
    centre.set_value_accesskit(1.5);
    h.run_steps(3);
    let session = h.state().playground().session().unwrap();
    let (_, model) = session.model().unwrap();
    match model {
        flowplay::flow::FlowModel::Radial(f) => assert!((f.center()[0] - 1.5).abs() < 1e-9),
        _ => unreachable!("a radial run"),
    }
    assert!(session.picture_version > before, "the views did not follow");
    assert_eq!(session.picture.center.unwrap().x, 1.5);
    // and training resumes from there
    h.get_by_label("Play").click();
    h.run_steps(10);
    assert!(steps(&h) > 5);
}

#[test]
fn metrics_follow_training_where_the_target_allows() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Play").click();
    train_with_redraws(&mut h, 8);
    h.run_steps(1);
    let metrics = &h.state().playground().session().unwrap().metrics;
    assert!(metrics.len() >= 2, "{} measurements", metrics.len());
    let (first, last) = (metrics[0], metrics[metrics.len() - 1]);
    assert!(last.step > first.step);
    assert!(first.held_out_nll.is_some() && first.ess.is_none());
    assert!(
        last.grid_kl.unwrap() < first.grid_kl.unwrap(),
        "the grid KL did not fall: {first:?} -> {last:?}"
    );
    screenshot(&mut h, "app-metrics-rings");
    // an energy target: reverse KL and ESS/N instead of a held-out NLL
    let mut h = harness(small("circular-gmm", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(30);
    let last = *h
        .state()
        .playground()
        .session()
        .unwrap()
        .metrics
        .last()
        .unwrap();
    assert!(last.held_out_nll.is_none());
    assert!((0.0..=1.0).contains(&last.ess.unwrap()));
    assert!(last.reverse_kl.unwrap().is_finite());
    screenshot(&mut h, "app-metrics-energy");
}

/// A lost GPU device: the run carries on on the CPU from where it was, and
/// moves back once a GPU is found again.
#[test]
fn a_lost_gpu_device_moves_the_run_to_the_cpu_and_back() {
    let mut h = gpu_harness(small("rings", FlowKind::Radial));
    h.run_steps(3);
    h.get_by_label("Play").click();
    train_with_redraws(&mut h, 4);
    let session = h.state().playground().session().unwrap();
    assert!(session.on_gpu());
    let before = session.steps_done();
    assert!(before > 20, "only {before} steps on the GPU");
    session.gpu_context().unwrap().device.destroy();
    h.run_steps(5);
    let session = h.state().playground().session().unwrap();
    assert!(
        !session.on_gpu(),
        "still on the lost GPU: {}",
        session.device()
    );
    let resumed = session.steps_done();
    assert!(
        resumed > 0 && resumed <= before + 80,
        "resumed at {resumed}"
    );
    h.get_by_label_contains("The GPU device was lost");
    h.run_steps(20);
    let s = h.state().playground().session().unwrap();
    assert!(
        steps(&h) > resumed,
        "training stopped on the CPU: {:?} {}",
        s.status,
        s.device()
    );
    screenshot(&mut h, "app-gpu-lost");
    // a GPU again, and the run moves back to it
    h.get_by_label("Look for a GPU again").click();
    h.run_steps(3);
    let on_cpu = steps(&h);
    h.get_by_label("Move this run to the GPU").click();
    h.run_steps(10);
    let session = h.state().playground().session().unwrap();
    assert!(session.on_gpu(), "backend: {}", session.device());
    assert!(session.steps_done() >= on_cpu.saturating_sub(1));
}

#[test]
fn a_smooth_sample_target_also_trains_by_reverse_kl() {
    let mut h = harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("reverse KL").click();
    h.get_by_label("Reset").click();
    h.run_steps(2);
    let session = h.state().playground().session().unwrap();
    assert_eq!(session.loss(), flowplay::train::Loss::ReverseKl);
    assert!(session.settings.to_query().contains("kl=reverse"));
    h.get_by_label("Play").click();
    train_with_redraws(&mut h, 6);
    h.run_steps(1);
    let session = h.state().playground().session().unwrap();
    let losses = &session.losses;
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    assert!(
        mean(&losses[losses.len() - 20..]) < mean(&losses[..20]),
        "the reverse KL did not fall"
    );
    let last = session.metrics.last().unwrap();
    assert!(last.ess.is_some() && last.held_out_nll.is_some());
    screenshot(&mut h, "app-rings-reverse-kl");
    // the checkerboard's density is not smooth: the choice is off there
    let mut h = harness(small("checkerboard", FlowKind::Radial));
    h.run_steps(2);
    h.get_by_label("reverse KL").click();
    h.get_by_label("Reset").click();
    h.run_steps(2);
    let session = h.state().playground().session().unwrap();
    assert!(!session.settings.reverse_kl);
    assert_eq!(session.loss(), flowplay::train::Loss::ForwardKl);
}

/// The phi^4 lab: opened from the switch, it trains a lattice flow live with
/// an HMC reference beside it; Compare trains affine, analytic and Z2 flows
/// side by side, and at a broken point the Z2 flow keeps both signs of M.
#[test]
fn the_phi4_lab_trains_and_compares_lattice_flows() {
    let mut h = harness(Settings::default());
    h.run_steps(2);
    h.get_by_label("phi^4 lattice").click();
    h.run_steps(3);
    let lab = h.state().lab().expect("the lab opened");
    let reference = lab.reference.as_ref().expect("an HMC reference");
    assert!(reference.observables.abs_m.mean > 0.0);
    assert_eq!(lab.runs.len(), 1);
    assert_eq!(lab.runs[0].steps(), 0);
    h.get_by_label("Play").click();
    h.run_steps(30);
    let run = &h.state().lab().unwrap().runs[0];
    assert!(run.steps() >= 25, "only {} steps", run.steps());
    assert!(!run.fields.is_empty() && run.estimates.is_some());
    h.get_by_label("broken point").click();
    h.get_by_label("Compare: affine vs analytic vs Z2").click();
    h.run_steps(60);
    let lab = h.state().lab().unwrap();
    let labels: Vec<&str> = lab.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "coupling affine",
            "coupling affine+cubic_rational",
            "coupling affine+cubic_rational Z2"
        ]
    );
    assert!(lab.runs.iter().all(|r| r.steps() >= 20 && r.ess.len() >= 2));
    // the Z2 design samples both modes (256 samples: 1/2 within 4 sigma)
    let z2 = lab.runs[2].estimates.as_ref().unwrap();
    assert!(
        (z2.positive_fraction - 0.5).abs() < 0.125,
        "{}",
        z2.positive_fraction
    );
    screenshot(&mut h, "app-phi4-lab-compare");
    h.get_by_label("2D flows").click();
    h.run_steps(2);
    assert!(h.state().playground().session().is_some());
}

/// The lab's layer by layer: the latent normal field at k = 0 (its
/// magnetization a narrow peak at 0), the model's samples at k = N, a morph
/// between them, and the run to show chosen among a comparison's.
#[test]
fn the_lab_shows_a_lattice_flow_layer_by_layer() {
    let mut h = harness(Settings::default());
    h.run_steps(2);
    h.get_by_label("phi^4 lattice").click();
    h.run_steps(3);
    h.get_by_label("Play").click();
    h.run_steps(10);
    h.get_by_label("Pause").click();
    h.get_by_label("Layer by layer").click();
    h.run_steps(3);
    let lab = h.state().lab().unwrap();
    let layers = lab.layers().expect("the window is open");
    let n = layers.scrubber.n();
    assert!(n >= 2, "{n} layers");
    assert_eq!(layers.scrubber.k, n);
    let at_n = layers.view().expect("the view at k = N").histogram.clone();
    assert_eq!(layers.view().unwrap().fields.len(), 4);
    h.get_by_label_contains(&format!("k = {n}: all {n} coupling layers"));
    screenshot(&mut h, "app-phi4-layers");
    h.get_by_role_and_label(eframe::egui::accesskit::Role::Slider, "maps applied")
        .set_value_accesskit(0.0);
    h.run_steps(3);
    let layers = h.state().lab().unwrap().layers().unwrap();
    let latent = &layers.view().expect("the view at k = 0").histogram;
    // M/V of 64 independent standard normals: sd 1/8
    assert!(latent.iter().all(|(m, _)| m.abs() < 0.6), "{latent:?}");
    assert_ne!(latent, &at_n);
    h.get_by_label("Morph").click();
    for _ in 0..200 {
        h.run_steps(1);
        if !h
            .state()
            .lab()
            .unwrap()
            .layers()
            .unwrap()
            .scrubber
            .morphing()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    let layers = h.state().lab().unwrap().layers().unwrap();
    assert!(!layers.scrubber.morphing());
    assert_eq!(layers.scrubber.k, n);
    // a comparison's runs can each be shown
    h.get_by_label("Compare: affine vs analytic vs Z2").click();
    h.run_steps(5);
    let z2 = "coupling affine+cubic_rational Z2";
    h.get_by_role_and_label(eframe::egui::accesskit::Role::Button, z2)
        .click();
    h.run_steps(3);
    let layers = h.state().lab().unwrap().layers().unwrap();
    assert_eq!(layers.run, 2);
    assert!(layers.view().is_some());
}

/// With a GPU (lavapipe here, a software one, so chosen by hand) the lab's
/// runs train there: steps come back from the GPU tasks, the measurements
/// from GPU samples; unticking "train on the GPU" and Reset move the next run
/// to the CPU.
#[test]
fn the_phi4_lab_trains_on_the_gpu_when_there_is_one() {
    let mut h = gpu_harness(small("rings", FlowKind::Radial));
    h.run_steps(2);
    h.state_mut().open_lab(Some(LabSettings {
        size: 4,
        batch: 16,
        ..Default::default()
    }));
    h.run_steps(2);
    // lavapipe is a software adapter: the lab starts on the CPU and says why
    let run = &h.state().lab().expect("the lab opened").runs[0];
    assert!(!run.on_gpu(), "device: {}", run.host.device);
    h.get_by_label_contains("emulated in software");
    h.get_by_label("train on the GPU").click();
    h.get_by_label("Reset").click();
    h.run_steps(2);
    let run = &h.state().lab().unwrap().runs[0];
    assert!(run.on_gpu(), "device: {}", run.host.device);
    assert!(run.host.device.starts_with("GPU"), "{}", run.host.device);
    h.get_by_label("Play").click();
    for _ in 0..150 {
        h.run_steps(1);
        if h.state().lab().unwrap().runs[0].ess.len() >= 3 {
            break;
        }
    }
    // paused, the last task's losses come home: one per step
    h.get_by_label("Pause").click();
    h.run_steps(2);
    let run = &h.state().lab().unwrap().runs[0];
    assert!(run.steps() >= 40, "only {} steps", run.steps());
    assert_eq!(run.losses.len(), run.steps());
    assert!(run.ess.len() >= 3 && run.stopped.is_none());
    assert_eq!(run.fields.len(), 4);
    assert!(run.fields.iter().all(|f| f.len() == 16));
    let first = run.losses[0].1;
    let last = run.losses.last().unwrap().1;
    assert!(last < first, "loss {first} -> {last}");
    screenshot(&mut h, "app-phi4-lab-gpu");
    h.get_by_label("train on the GPU").click();
    h.get_by_label("Reset").click();
    h.run_steps(2);
    let run = &h.state().lab().unwrap().runs[0];
    assert!(
        !run.on_gpu() && run.host.device.starts_with("CPU"),
        "{}",
        run.host.device
    );
}
