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

    /// What one case plays.
    struct Case {
        name: &'static str,
        settings: Settings,
        gpu: bool,
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
        vec![
            Case {
                name: "playground default (radial-fourier, spiral), GPU",
                settings: Settings::default(),
                gpu: true,
                lab: false,
            },
            Case {
                name: "playground default (radial-fourier, spiral), CPU",
                settings: Settings::default(),
                gpu: false,
                lab: false,
            },
            Case {
                name: "coupling 8 x 64, moons, GPU",
                settings: coupling,
                gpu: true,
                lab: false,
            },
            Case {
                name: "phi^4 lab default (L=8, 16 layers), GPU",
                settings: Settings::default(),
                gpu: true,
                lab: true,
            },
        ]
    }

    pub fn run(seconds: f64) -> Result<(), String> {
        println!(
            "frame_bench: 1280 x 800 page, {seconds} s a case; update = the app's frame \
             (training within the page's budget), render = drawing and reading back the page"
        );
        println!(
            "{:<52} {:<44} {:>7} {:>10} {:>10} {:>9} {:>9}",
            "case", "device", "frames", "update ms", "render ms", "frames/s", "steps/s"
        );
        for case in cases() {
            match measure(&case, seconds) {
                Ok(m) => println!(
                    "{:<52} {:<44} {:>7} {:>10.2} {:>10.2} {:>9.1} {:>9.1}",
                    case.name,
                    m.device,
                    m.frames,
                    m.update_ms,
                    m.render_ms,
                    m.frames as f64 / m.seconds,
                    m.steps as f64 / m.seconds
                ),
                Err(e) => println!("{:<52} {e}", case.name),
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
    }

    fn measure(case: &Case, seconds: f64) -> Result<Measured, String> {
        let settings = case.settings.clone();
        let gpu = case.gpu;
        let mut h = Harness::builder()
            .with_size([1280.0, 800.0])
            .wgpu()
            .build_eframe(move |_cc| {
                let mut app = PlaygroundApp::with_settings(settings);
                if gpu {
                    app.find_gpu();
                }
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
        Ok(Measured {
            device,
            frames: update.len(),
            steps: end_steps.saturating_sub(start_steps),
            seconds: elapsed,
            update_ms: median(&mut update),
            render_ms: median(&mut render),
        })
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
