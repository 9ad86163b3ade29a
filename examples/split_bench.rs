//! Training steps a second of a CPU run in a worker, alone and with its steps
//! split over more workers: the browser's code path (the same worker core and
//! messages), with threads for Web Workers, so the split's cost and gain can
//! be measured where there is no browser.
//!
//! ```text
//! cargo run --release --example split_bench -- [seconds per case, default 5]
//! ```
//!
//! Each case trains the recipe from the same start, granting steps as the
//! page does and counting the steps heard; a worker trains on one thread (as
//! in a browser). The figures are printed, never checked.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let seconds = std::env::args()
        .nth(1)
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(5.0);
    if let Err(e) = native::run(seconds) {
        eprintln!("split_bench: {e}");
        std::process::exit(1);
    }
}

// Workers are threads here; in a browser build there is nothing to measure.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use flowplay::app::host::worker;
    use flowplay::app::host::{CpuReason, HostSpec, TrainerHost};
    use flowplay::app::playground::picture::PictureJob;
    use flowplay::flow::{FlowConfig, FlowKind};
    use flowplay::rng::Rng;
    use flowplay::target::Target;
    use flowplay::train::{Loss, TrainSettings};
    use std::time::{Duration, Instant};

    /// A recipe: its name, flow and target, batch 512.
    fn recipes() -> Vec<(&'static str, FlowConfig, Target)> {
        let mut fourier = FlowConfig::defaults(FlowKind::RadialFourier);
        fourier.center = Some(vec![-0.5, -1.0]);
        fourier.log_scale = Some(vec![0.0, 0.0]);
        let coupling = FlowConfig::defaults(FlowKind::Coupling);
        vec![
            (
                "radial-fourier, spiral, 64 x cubic (the page's default)",
                fourier,
                Target::Spiral,
            ),
            ("coupling 8 x 128, moons, cubic", coupling, Target::Moons),
        ]
    }

    pub fn run(seconds: f64) -> Result<(), String> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!("{cores} cores; {seconds} s a case; batch 512");
        println!(
            "{:<56} {:>8} {:>12} {:>9}",
            "recipe", "workers", "steps/s", "vs one"
        );
        worker::set_wanted(true);
        for (name, flow, target) in recipes() {
            let model = flow
                .build::<f64>(2, &mut Rng::seeded(0))
                .map_err(|e| e.to_string())?;
            let mut alone = None;
            for workers in 1..=cores.clamp(2, worker::MAX_WORKERS) {
                let spec = HostSpec {
                    model: model.clone(),
                    target: target.clone(),
                    settings: TrainSettings {
                        batch: 512,
                        learning_rate: 1e-3,
                        seed: 0,
                        loss: Loss::ForwardKl,
                        threads: 1,
                    },
                    fixed_centre: false,
                };
                worker::set_workers(workers);
                let rate = steps_per_second(spec, seconds)?;
                let one = *alone.get_or_insert(rate);
                println!("{name:<56} {workers:>8} {rate:>12.1} {:>8.2}x", rate / one);
            }
        }
        Ok(())
    }

    /// Steps heard a second over `seconds`, after a second of warm-up.
    fn steps_per_second(spec: HostSpec, seconds: f64) -> Result<f64, String> {
        let mut host = TrainerHost::<PictureJob>::new(spec, Err(CpuReason::Chosen))?;
        if !host.in_worker() {
            return Err(format!(
                "the run trains on {}, not in a worker",
                host.device
            ));
        }
        let mut train_for = |span: Duration| -> Result<usize, String> {
            let start = (Instant::now(), host.steps_done());
            while start.0.elapsed() < span {
                // a generous grant, taken in as the replies come
                let progress = host.frame(1000, Duration::ZERO, None);
                if let Some(why) = progress.stopped {
                    return Err(why);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(host.steps_done() - start.1)
        };
        train_for(Duration::from_secs(1))?;
        let steps = train_for(Duration::from_secs_f64(seconds))?;
        Ok(steps as f64 / seconds)
    }
}
