//! The page's frame loop without a window: the app rendered offscreen by wgpu
//! (as the kittest tests do), playing, with ms a frame and training steps a
//! second printed for each case, and the adapter's name.
//!
//! ```text
//! cargo run --release --example frame_bench -- [seconds per case, default 10]
//! ```
//!
//! A frame here is the app's update (its training steps within the page's
//! budget, the views' redraws) and then a render of the whole 1280 x 800 page,
//! read back to memory as the harness does; the two are timed apart. The
//! figures are printed, never checked: `scripts/gpu-bench.sh` runs this on a
//! machine with a real GPU.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let seconds = std::env::args()
        .nth(1)
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(10.0);
    if let Err(e) = native::run(seconds) {
        eprintln!("frame_bench: {e}");
        std::process::exit(1);
    }
}

// The harness is native only; there is nothing to measure in a browser build.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use flowplay::app::PlaygroundApp;
    use flowplay::app::lab::settings::LabSettings;
    use flowplay::app::playground::settings::{Settings, TargetChoice};
    use flowplay::flow::FlowKind;
    use std::time::{Duration, Instant};

    /// Where a case trains.
    #[derive(Clone, Copy, PartialEq)]
    enum Device {
        Cpu,
        /// a GPU device of the run's own: the views' data read back each
        /// task and drawn from the CPU (as before the one-device change)
        OwnGpu,
        /// the device the page renders with: the views drawn where they lie
        PageGpu,
    }

    /// What one case plays.
    struct Case {
        name: &'static str,
        settings: Settings,
        device: Device,
        lab: bool,
    }

    fn cases() -> Vec<Case> {
        // as the page makes it when a visitor picks the coupling flow: its
        // stack and learning rate suited to it
        let mut coupling = Settings {
            target: TargetChoice::Preset("moons"),
            flow: FlowKind::Coupling,
            ..Settings::default()
        };
        coupling.suit_flow();
        let case = |name, settings: &Settings, device, lab| Case {
            name,
            settings: settings.clone(),
            device,
            lab,
        };
        let spiral = Settings::default();
        vec![
            case(
                "spiral (radial-fourier), GPU, page's device",
                &spiral,
                Device::PageGpu,
                false,
            ),
            case(
                "spiral (radial-fourier), GPU, own device",
                &spiral,
                Device::OwnGpu,
                false,
            ),
            case("spiral (radial-fourier), CPU", &spiral, Device::Cpu, false),
            case(
                "coupling 8 x 64, moons, GPU, page's device",
                &coupling,
                Device::PageGpu,
                false,
            ),
            case(
                "coupling 8 x 64, moons, GPU, own device",
                &coupling,
                Device::OwnGpu,
                false,
            ),
            case(
                "phi^4 lab default (L=8, 16 layers), GPU",
                &spiral,
                Device::PageGpu,
                true,
            ),
        ]
    }

    pub fn run(seconds: f64) -> Result<(), String> {
        println!(
            "frame_bench: 1280 x 800 page, {seconds} s a case; update = the app's frame \
             (training within the page's budget), render = drawing and reading back the page"
        );
        println!(
            "{:<48} {:<44} {:>7} {:>10} {:>10} {:>9} {:>9} {:>13}",
            "case",
            "device",
            "frames",
            "update ms",
            "render ms",
            "frames/s",
            "steps/s",
            "read B/frame"
        );
        for case in cases() {
            match measure(&case, seconds) {
                Ok(m) => println!(
                    "{:<48} {:<44} {:>7} {:>10.2} {:>10.2} {:>9.1} {:>9.1} {:>13}",
                    case.name,
                    m.device,
                    m.frames,
                    m.update_ms,
                    m.render_ms,
                    m.frames as f64 / m.seconds,
                    m.steps as f64 / m.seconds,
                    m.read_back.map_or("n/a".into(), |b| format!(
                        "{:.0}",
                        b as f64 / m.frames as f64
                    ))
                ),
                Err(e) => println!("{:<48} {e}", case.name),
            }
        }
        Ok(())
    }

    struct Measured {
        device: String,
        frames: usize,
        steps: usize,
        seconds: f64,
        /// medians over the frames
        update_ms: f64,
        render_ms: f64,
        /// bytes copied back from the GPU over the frames (GPU runs)
        read_back: Option<u64>,
    }

    fn measure(case: &Case, seconds: f64) -> Result<Measured, String> {
        let settings = case.settings.clone();
        let device = case.device;
        let mut h = Harness::builder()
            .with_size([1280.0, 800.0])
            .wgpu()
            .build_eframe(move |cc| {
                let mut app = PlaygroundApp::with_settings(settings);
                match device {
                    Device::Cpu => {}
                    Device::OwnGpu => app.find_gpu(),
                    Device::PageGpu => app.use_render_device(cc.wgpu_render_state.as_ref()),
                }
                // chosen, so an emulated GPU (lavapipe) trains too
                app.choose_gpu(device != Device::Cpu);
                app
            });
        h.run_steps(3);
        if case.lab {
            h.state_mut().open_lab(Some(LabSettings::default()));
            h.run_steps(3);
        }
        h.get_by_label("Play").click();
        // warm up: pipelines built, the first redraws done (at most two
        // seconds: on an emulated GPU one frame's steps can take seconds)
        let warm = Instant::now();
        for _ in 0..20 {
            h.step();
            if warm.elapsed() > Duration::from_secs(2) {
                break;
            }
        }
        // (the device column says where it trained: a software adapter keeps
        // the lab on the CPU)
        let (_, start_steps) = progress(&h, case.lab)?;
        let read_before = bytes_read_back(&h).filter(|_| !case.lab);
        let mut update = Vec::new();
        let mut render = Vec::new();
        let clock = Instant::now();
        while clock.elapsed() < Duration::from_secs_f64(seconds) {
            let t = Instant::now();
            h.step();
            update.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            h.render()?;
            render.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let elapsed = clock.elapsed().as_secs_f64();
        let (device, end_steps) = progress(&h, case.lab)?;
        let read_back = bytes_read_back(&h)
            .zip(read_before)
            .map(|(after, before)| after - before);
        Ok(Measured {
            device,
            frames: update.len(),
            steps: end_steps.saturating_sub(start_steps),
            seconds: elapsed,
            update_ms: median(&mut update),
            render_ms: median(&mut render),
            read_back,
        })
    }

    /// Bytes the playground's GPU run has read back so far (none on the CPU).
    fn bytes_read_back(h: &Harness<'static, PlaygroundApp>) -> Option<u64> {
        let session = h.state().playground().session()?;
        session.gpu_context().map(|ctx| ctx.bytes_read_back())
    }

    /// Where the run on screen trains, and its steps so far.
    fn progress(h: &Harness<'static, PlaygroundApp>, lab: bool) -> Result<(String, usize), String> {
        let app = h.state();
        if lab {
            let run = app
                .lab()
                .and_then(|l| l.runs.first())
                .ok_or("the lab has no run")?;
            Ok((run.host.device.clone(), run.steps()))
        } else {
            let session = app
                .playground()
                .session()
                .ok_or("the playground has no run")?;
            Ok((session.device().to_string(), session.steps_done()))
        }
    }

    fn median(values: &mut [f64]) -> f64 {
        if values.is_empty() {
            return f64::NAN;
        }
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    }
}
