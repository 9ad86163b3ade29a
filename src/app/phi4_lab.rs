//! The phi^4 lab: flows trained on the lattice field by reverse KL, live, next
//! to an HMC reference: field configurations as heat maps, the magnetization
//! histogram of flow samples over HMC's, and ESS/N, IMH acceptance and the
//! fraction of samples with M > 0 over training. "Compare" trains an affine
//! coupling flow, an analytic-family one and a Z2-equivariant one side by
//! side on the same couplings, so mode collapse and its cure are seen.
//!
//! Runs train on the GPU where the page has a hardware one (the lattice
//! kernels of `crate::gpu::lattice`, asynchronously: [`super::lab_trainer`];
//! a software adapter is offered, not chosen) and on the CPU otherwise;
//! either way the measurements are made on the CPU from 256 flow samples.

use super::lab_trainer::{LabTrainer, stop_reason};
use super::phi4_views::{field_ui, histogram_ui, lines_ui};
use super::settings::{apply_query, parse_in, set_if};
use crate::bijection::Family;
use crate::gpu::GpuContext;
use crate::mcmc::flow_estimates::{FlowEstimates, estimate_from_samples, flow_samples};
use crate::mcmc::hmc::HmcSettings;
use crate::mcmc::phi4_run::{Phi4Reference, reference};
use crate::rng::Rng;
use crate::target::Target;
use crate::target::phi4::{Couplings, Phi4};
use crate::train::phi4::Design;
use crate::train::run::{Precision, RunConfig};
use crate::train::{Loss, TrainSettings};
use eframe::egui::{self, Color32, Vec2};
use web_time::{Duration, Instant};

/// Flow samples drawn for each measurement (ESS/N, acceptance, histogram).
const MEASURE_SAMPLES: usize = 256;
/// Training steps between measurements of a run.
const MEASURE_EVERY: usize = 20;
/// Field configurations shown per run (the first of the measured samples).
const FIELDS: usize = 4;
/// The most training steps one GPU task takes (its losses come back together).
const MAX_GPU_STEPS: usize = 32;
/// HMC trajectories of the reference on an 8 x 8 lattice; larger lattices get
/// fewer (the two-point function costs V^2 a trajectory), so a reset at L = 16
/// stays near a second in the browser.
const HMC_TRAJECTORIES: usize = 4000;

/// The reference's trajectories on a lattice of `volume` sites.
fn hmc_trajectories(volume: usize) -> usize {
    (HMC_TRAJECTORIES * 64 / volume.max(1)).clamp(1000, HMC_TRAJECTORIES)
}

/// The flows the lab offers.
const FLOWS: [&str; 2] = ["coupling", "radial"];

/// The families the lab offers.
const FAMILIES: [Family; 4] = [
    Family::CubicRational,
    Family::Sinh,
    Family::Cubic,
    Family::Affine,
];

/// Line colours of the runs (affine, analytic, Z2 in a comparison).
const COLOURS: [Color32; 3] = [
    Color32::from_rgb(230, 120, 50),
    Color32::from_rgb(70, 150, 230),
    Color32::from_rgb(90, 190, 90),
];

/// What the user chooses in the lab (and its home in the URL).
#[derive(Clone, Debug, PartialEq)]
pub struct LabSettings {
    /// lattice side L (4 to 16, even)
    pub size: usize,
    pub m2: f64,
    pub lambda: f64,
    /// "coupling" or "radial"
    pub flow: &'static str,
    pub family: Family,
    pub z2: bool,
    pub learning_rate: f64,
    pub batch: usize,
    pub seed: u64,
}

impl Default for LabSettings {
    /// The symmetric point of math.md section 6 on an 8 x 8 lattice, with a
    /// page-sized lattice coupling flow.
    fn default() -> Self {
        Self {
            size: 8,
            m2: -4.0,
            lambda: 8.0,
            flow: "coupling",
            // the best plain and Z2 family in the README's comparison
            family: Family::Sinh,
            z2: false,
            learning_rate: 3e-3,
            batch: 64,
            seed: 0,
        }
    }
}

impl LabSettings {
    /// The settings as a URL query (without the `?`).
    pub fn to_query(&self) -> String {
        format!(
            "lab=phi4&L={}&m2={}&lambda={}&flow={}&family={}&z2={}&lr={}&batch={}&seed={}",
            self.size,
            self.m2,
            self.lambda,
            self.flow,
            self.family.name(),
            u8::from(self.z2),
            self.learning_rate,
            self.batch,
            self.seed
        )
    }

    /// Settings from a URL query: valid entries are used, the rest named.
    pub fn from_query(query: &str) -> (Self, Vec<String>) {
        let mut s = Self::default();
        let ignored = apply_query(query, |key, value| match key {
            "lab" => value == "phi4",
            "L" => {
                value.parse::<usize>().is_ok_and(|l| l % 2 == 0)
                    && parse_in(&mut s.size, value, 4..=16)
            }
            "m2" => parse_in(&mut s.m2, value, -8.0..=4.0),
            "lambda" => parse_in(&mut s.lambda, value, 0.0..=20.0),
            "flow" => FLOWS
                .iter()
                .find(|f| **f == value)
                .map(|f| s.flow = f)
                .is_some(),
            "family" => FAMILIES
                .iter()
                .find(|f| f.name() == value)
                .map(|&f| s.family = f)
                .is_some(),
            "z2" => set_if(&mut s.z2, value == "1", value == "0" || value == "1"),
            "lr" => parse_in(&mut s.learning_rate, value, 1e-5..=0.1),
            "batch" => parse_in(&mut s.batch, value, 8..=1024),
            "seed" => parse_in(&mut s.seed, value, 0..=u64::MAX),
            _ => false,
        });
        (s, ignored)
    }

    /// The couplings, checked (an action unbounded below is refused).
    pub fn model(&self) -> Result<Phi4, String> {
        Phi4::new(
            self.size,
            Couplings {
                m2: self.m2,
                lambda: self.lambda,
            },
        )
    }

    /// The design these settings describe, page-sized: 4 coupling layers of
    /// 8 channels (the CLI's default is 8 layers), 8 copies for radial flows.
    fn design(&self, family: Family, z2: bool) -> Result<Design, String> {
        let mut design = Design::new(self.flow, family, z2)?;
        design.flow.layers = 4;
        if self.flow == "radial" {
            design.flow.stack = 8;
        }
        Ok(design)
    }
}

/// One flow training in the lab.
pub struct LabRun {
    /// the design, e.g. "coupling sinh Z2"
    pub label: String,
    colour: Color32,
    trainer: LabTrainer,
    /// where it trains, e.g. "GPU (WebGPU, f32)" or "CPU (2 threads, f32)"
    pub device: String,
    /// steps the next GPU task takes (sized to the frame budget)
    gpu_steps: usize,
    /// (step, value) series: the batch loss every step, the rest every
    /// [`MEASURE_EVERY`] steps
    pub losses: Vec<(usize, f64)>,
    pub ess: Vec<(usize, f64)>,
    pub acceptance: Vec<(usize, f64)>,
    pub positive: Vec<(usize, f64)>,
    /// the latest measurement
    pub estimates: Option<FlowEstimates>,
    /// a few flow samples (V values each)
    pub fields: Vec<Vec<f64>>,
    measured_at: Option<usize>,
    /// why training stopped (the trainer kept the last good parameters)
    pub stopped: Option<String>,
    /// time spent in training steps (not measurements), for the step rate
    train_time: Duration,
    /// Adam's step size now (halved by each resumption after a divergence)
    learning_rate: f64,
}

impl LabRun {
    /// Training steps done.
    pub fn steps(&self) -> usize {
        self.trainer.steps_done()
    }

    /// Mean wall time of a training step so far, in milliseconds.
    pub fn ms_per_step(&self) -> Option<f64> {
        let n = self.losses.len();
        (n > 0).then(|| self.train_time.as_secs_f64() * 1e3 / n as f64)
    }

    /// Whether it trains on the GPU.
    pub fn on_gpu(&self) -> bool {
        self.trainer.on_gpu()
    }

    /// Sets Adam's step size for the following steps.
    fn set_learning_rate(&mut self, lr: f64) {
        self.learning_rate = lr;
        self.trainer.set_learning_rate(lr);
    }
}

/// The lab: its settings, the runs training side by side, and the reference.
pub struct Phi4Lab {
    /// the settings being edited (applied by Reset and Compare)
    pub settings: LabSettings,
    /// the theory the runs train on
    model: Option<Phi4>,
    /// one run, or the three of a comparison
    pub runs: Vec<LabRun>,
    /// HMC on the runs' lattice and couplings
    pub reference: Option<Phi4Reference>,
    /// whether the runs train each frame
    pub running: bool,
    /// why the last reset failed
    pub message: Option<String>,
    /// the page's GPU, if it has one (set by the page before each frame)
    pub gpu: Option<GpuContext>,
    /// whether new runs train on the GPU when there is one (not at first on a
    /// software adapter: emulated, the lattice kernels run far slower than
    /// the CPU trainer, 7 s against 45 ms a step in headless Chromium)
    pub prefer_gpu: bool,
    /// the designs of the runs (to start them again on a GPU found late)
    designs: Vec<Design>,
    rng: Rng,
}

impl Phi4Lab {
    /// The lab for `settings`: one run, paused at step 0, and its HMC
    /// reference; runs train on `gpu` where given.
    pub fn new(settings: LabSettings, gpu: Option<GpuContext>) -> Self {
        let prefer_gpu = gpu.as_ref().is_none_or(|g| !g.software);
        let mut lab = Self {
            settings,
            model: None,
            runs: Vec::new(),
            reference: None,
            running: false,
            message: None,
            gpu,
            prefer_gpu,
            designs: Vec::new(),
            rng: Rng::seeded(7),
        };
        lab.reset();
        lab
    }

    /// One run of the chosen design, paused at step 0.
    pub fn reset(&mut self) {
        let s = self.settings.clone();
        let designs = s.design(s.family, s.z2).map(|d| vec![d]);
        self.start(designs);
    }

    /// An affine coupling flow, the chosen analytic family's, and the
    /// Z2-equivariant design of that family, side by side, running.
    pub fn compare(&mut self) {
        let s = self.settings.clone();
        let family = if s.family == Family::Affine {
            Family::CubicRational
        } else {
            s.family
        };
        let designs = [
            Design::new("coupling", Family::Affine, false),
            Design::new("coupling", family, false),
            Design::new("coupling", family, true),
        ]
        .into_iter()
        .map(|d| {
            d.map(|mut d| {
                d.flow.layers = 4;
                d
            })
        })
        .collect();
        self.start(designs);
        self.running = self.message.is_none();
    }

    fn start(&mut self, designs: Result<Vec<Design>, String>) {
        self.running = false;
        let built = designs.and_then(|designs| {
            let model = self.settings.model()?;
            let runs = designs
                .iter()
                .enumerate()
                .map(|(k, d)| self.new_run(&model, d, COLOURS[k % COLOURS.len()]))
                .collect::<Result<Vec<_>, String>>()?;
            Ok((model, runs, designs))
        });
        match built {
            Ok((model, runs, designs)) => {
                self.designs = designs;
                let same_theory = self
                    .model
                    .is_some_and(|m| m.size == model.size && m.couplings == model.couplings)
                    && self.reference.is_some();
                if !same_theory {
                    let hmc = HmcSettings {
                        trajectories: hmc_trajectories(model.volume()),
                        thermalize: 500,
                        ..HmcSettings::default()
                    };
                    self.reference = reference(&model, &hmc, |_, _| {}).ok();
                }
                self.model = Some(model);
                self.runs = runs;
                self.message = None;
                for k in 0..self.runs.len() {
                    self.measure(k);
                }
            }
            Err(e) => self.message = Some(e),
        }
    }

    fn new_run(&self, model: &Phi4, design: &Design, colour: Color32) -> Result<LabRun, String> {
        let s = &self.settings;
        let config = RunConfig {
            target: Target::Phi4(*model),
            flow: design.flow_for(model),
            steps: 0,
            settings: TrainSettings {
                batch: s.batch,
                learning_rate: s.learning_rate,
                seed: s.seed,
                loss: Loss::ReverseKl,
                threads: crate::train::default_threads(),
            },
            precision: Precision::F32,
            eval_samples: MEASURE_SAMPLES,
        };
        // the Z2 radial flow's fixed centre is the CPU trainer's alone
        let fixed_centre = design.flow.fixed_centre();
        let gpu = self
            .gpu
            .as_ref()
            .filter(|_| self.prefer_gpu && !fixed_centre);
        let (trainer, device) = LabTrainer::new(&config, gpu)?;
        Ok(LabRun {
            label: design.label(),
            colour,
            trainer,
            device,
            gpu_steps: 1,
            losses: Vec::new(),
            ess: Vec::new(),
            acceptance: Vec::new(),
            positive: Vec::new(),
            estimates: None,
            fields: Vec::new(),
            measured_at: None,
            stopped: None,
            train_time: Duration::ZERO,
            learning_rate: s.learning_rate,
        })
    }

    /// Trains every run in turn for about `budget` (each at least one step),
    /// measuring each every [`MEASURE_EVERY`] steps. GPU runs take in what
    /// their last task returned and start the next one.
    pub fn train_for(&mut self, budget: Duration) {
        for k in 0..self.runs.len() {
            self.gpu_frame(k, budget);
        }
        if !self.running {
            return;
        }
        let start = Instant::now();
        loop {
            let mut any = false;
            for k in 0..self.runs.len() {
                let run = &mut self.runs[k];
                if run.stopped.is_some() {
                    continue;
                }
                any = true;
                let LabTrainer::Cpu(trainer) = &mut run.trainer else {
                    continue;
                };
                let began = Instant::now();
                let result = trainer.step();
                run.train_time += began.elapsed();
                match result {
                    Ok(loss) => {
                        let step = trainer.steps_done();
                        run.losses.push((step, loss));
                        if step.is_multiple_of(MEASURE_EVERY) {
                            self.measure(k);
                        }
                    }
                    Err(e) => run.stopped = Some(stop_reason(e)),
                }
            }
            if !any {
                self.running = false;
                break;
            }
            let cpu_runs = self.runs.iter().any(|r| !r.on_gpu() && r.stopped.is_none());
            if !cpu_runs || start.elapsed() >= budget {
                break;
            }
        }
    }

    /// One frame of GPU run `k`: records what its last task returned, then
    /// hands it the next steps (as many as fit `budget` at the measured
    /// pace) and, when a measurement is due, the latent fields to sample.
    fn gpu_frame(&mut self, k: usize, budget: Duration) {
        let run = &mut self.runs[k];
        if !run.on_gpu() || run.trainer.busy() {
            return;
        }
        if let Some(back) = run.trainer.collect() {
            let took = back.losses.len();
            run.losses.extend(back.losses);
            run.train_time += Duration::from_secs_f64(back.seconds);
            if took > 0 {
                let per_step = back.seconds / took as f64;
                let fit = (budget.as_secs_f64() / per_step.max(1e-6)) as usize;
                run.gpu_steps = fit.clamp(1, MAX_GPU_STEPS);
            }
            if let Some(e) = back.error {
                run.stopped = Some(e);
            }
            if let Some(samples) = back.samples {
                self.record(k, samples.step, &samples.fields, &samples.log_q);
            }
        }
        let Some(model) = self.model else { return };
        let running = self.running;
        let run = &mut self.runs[k];
        let done = run.trainer.steps_done();
        let steps = if running && run.stopped.is_none() {
            run.gpu_steps
        } else {
            0
        };
        // measured when a multiple of MEASURE_EVERY is passed (or never yet)
        let due = match run.measured_at {
            None => true,
            Some(at) => (done + steps) / MEASURE_EVERY > at / MEASURE_EVERY,
        };
        if steps == 0 && !due {
            return;
        }
        let latent = due.then(|| {
            run.measured_at = Some(done + steps);
            (0..MEASURE_SAMPLES * model.volume())
                .map(|_| self.rng.normal() as f32)
                .collect()
        });
        self.runs[k].trainer.launch(steps, latent);
    }

    /// Measures CPU run `k` now: its samples' ESS/N, acceptance, M > 0
    /// fraction, corrected observables and a few configurations (GPU runs
    /// are measured from the samples their tasks draw).
    fn measure(&mut self, k: usize) {
        let run = &mut self.runs[k];
        let LabTrainer::Cpu(trainer) = &run.trainer else {
            return;
        };
        let step = trainer.steps_done();
        if run.measured_at == Some(step) {
            return;
        }
        run.measured_at = Some(step);
        let model = trainer.model();
        let (fields, log_q) = flow_samples(model.as_flow(), MEASURE_SAMPLES, &mut self.rng);
        self.record(k, step, &fields, &log_q);
    }

    /// Run `k`'s measurement at `step` from flow samples (fields n x V, log q).
    fn record(&mut self, k: usize, step: usize, fields: &[f64], log_q: &[f64]) {
        let Some(model) = self.model else {
            return;
        };
        let run = &mut self.runs[k];
        match estimate_from_samples(&model, fields, log_q, &mut self.rng) {
            Ok(e) => {
                run.ess.push((step, e.ess));
                run.acceptance.push((step, e.acceptance));
                run.positive.push((step, e.positive_fraction));
                run.estimates = Some(e);
            }
            Err(e) => run.stopped = Some(e),
        }
        run.fields = fields
            .chunks(model.volume())
            .take(FIELDS)
            .map(<[f64]>::to_vec)
            .collect();
    }

    /// Takes the page's GPU as it is now: one found after the lab opened (a
    /// browser answers late, often after a link's lab has started) starts
    /// the runs again there if they are still in their first steps; a lost
    /// one is dropped, so the next Reset trains on the CPU.
    pub fn adopt_gpu(&mut self, gpu: Option<GpuContext>) {
        let gpu = gpu.filter(|g| g.lost().is_none());
        let found = gpu.is_some() && self.gpu.is_none();
        if found {
            self.prefer_gpu = gpu.as_ref().is_some_and(|g| !g.software);
        }
        self.gpu = gpu;
        let early = self
            .runs
            .iter()
            .all(|r| r.steps() < MEASURE_EVERY && !r.on_gpu());
        if found && self.prefer_gpu && early && !self.designs.is_empty() {
            let running = self.running;
            self.start(Ok(self.designs.clone()));
            self.running = running && self.message.is_none();
        }
    }

    /// Plays or pauses (a run that stopped stays stopped).
    pub fn toggle_play(&mut self) {
        self.running = !self.running && self.runs.iter().any(|r| r.stopped.is_none());
    }

    /// Lets a diverged run go on from its last good state with half the step size.
    fn resume(&mut self, k: usize) {
        let run = &mut self.runs[k];
        run.stopped = None;
        let lr = run.learning_rate * 0.5;
        run.set_learning_rate(lr);
        run.label = format!(
            "{} (lr {lr:.0e})",
            run.label.split(" (lr").next().unwrap_or("")
        );
        self.running = true;
    }

    /// The left panel: couplings, design, and the run controls.
    pub fn controls_ui(&mut self, ui: &mut egui::Ui) {
        ui.heading("phi^4 lattice lab");
        ui.label(
            "Flows learn the lattice field theory of math.md section 6 from its action alone \
             (reverse KL), checked against Hamiltonian Monte Carlo.",
        );
        ui.separator();
        let s = &mut self.settings;
        ui.add(
            egui::Slider::new(&mut s.size, 4..=16)
                .step_by(2.0)
                .text("lattice L"),
        )
        .on_hover_text("The lattice is L x L with periodic boundaries.");
        ui.add(
            egui::Slider::new(&mut s.m2, -8.0..=2.0)
                .step_by(0.25)
                .text("m^2"),
        )
        .on_hover_text(
            "Mass term. With lambda it sets the phase: at m^2 = -4 the field is disordered for \
             large lambda and orders into two modes (M > 0 or M < 0) for small lambda.",
        );
        ui.add(
            egui::Slider::new(&mut s.lambda, 0.0..=16.0)
                .step_by(0.25)
                .text("lambda"),
        )
        .on_hover_text(
            "Quartic coupling. At m^2 = -4, lambda = 8 is symmetric (<M> = 0, one broad mode); \
                 lambda = 2 is broken (two modes, M > 0 and M < 0).",
        );
        ui.horizontal(|ui| {
            if ui.button("symmetric point").clicked() {
                s.m2 = -4.0;
                s.lambda = 8.0;
            }
            if ui.button("broken point").clicked() {
                s.m2 = -4.0;
                s.lambda = 2.0;
            }
        });
        ui.separator();
        egui::ComboBox::from_label("flow")
            .selected_text(s.flow)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut s.flow, "coupling", "coupling (checkerboard, conv)");
                ui.selectable_value(&mut s.flow, "radial", "radial (whole field)");
            });
        egui::ComboBox::from_label("family")
            .selected_text(s.family.name())
            .show_ui(ui, |ui| {
                for f in FAMILIES {
                    ui.selectable_value(&mut s.family, f, f.name());
                }
            });
        ui.checkbox(&mut s.z2, "Z2-equivariant (odd)")
            .on_hover_text(
                "Odd site maps with an even/odd conditioner (coupling) or the centre fixed at 0 \
                 (radial): the flow's density is symmetric under phi -> -phi, so it cannot \
                 collapse onto one sign of M.",
            );
        let lr_changed = ui
            .add(
                egui::Slider::new(&mut s.learning_rate, 1e-4..=3e-2)
                    .logarithmic(true)
                    .text("learning rate"),
            )
            .on_hover_text("Adam's step size, applied at once.")
            .changed();
        ui.add(egui::Slider::new(&mut s.batch, 16..=256).text("batch"))
            .on_hover_text("Flow samples a training step; applied by Reset or Compare.");
        if lr_changed {
            let lr = s.learning_rate;
            for run in &mut self.runs {
                run.set_learning_rate(lr);
            }
        }
        ui.separator();
        ui.horizontal(|ui| {
            let play = if self.running { "Pause" } else { "Play" };
            if ui.button(play).on_hover_text("space").clicked() {
                self.toggle_play();
            }
            if ui.button("Reset").clicked() {
                self.reset();
            }
        });
        if ui
            .button("Compare: affine vs analytic vs Z2")
            .on_hover_text(
                "Trains three coupling flows side by side on these couplings: affine (RealNVP), \
                 the chosen analytic family, and its Z2-equivariant design.",
            )
            .clicked()
        {
            self.compare();
        }
        if let Some(m) = &self.message {
            ui.colored_label(ui.visuals().error_fg_color, m);
        }
        let mut resume = None;
        for (k, run) in self.runs.iter().enumerate() {
            if let Some(why) = &run.stopped {
                ui.colored_label(ui.visuals().error_fg_color, format!("{}: {why}", run.label));
                if ui
                    .button("Go on from the last good state (half the learning rate)")
                    .clicked()
                {
                    resume = Some(k);
                }
            }
        }
        if let Some(k) = resume {
            self.resume(k);
        }
        ui.separator();
        if let Some(gpu) = self.gpu.as_ref().filter(|g| g.lost().is_none()) {
            ui.checkbox(&mut self.prefer_gpu, "train on the GPU")
                .on_hover_text("Applied by Reset and Compare.");
            if gpu.software {
                ui.label(
                    "This GPU is emulated in software: the CPU trains the lattice flows faster.",
                );
            }
        }
        let mut devices: Vec<&str> = self.runs.iter().map(|r| r.device.as_str()).collect();
        devices.dedup();
        for device in devices {
            ui.label(format!("Training on: {device}"));
        }
    }

    /// The central panel: each run's fields and numbers, and the histogram.
    pub fn views_ui(&mut self, ui: &mut egui::Ui) {
        let Some(model) = self.model else {
            return;
        };
        let c = model.couplings;
        ui.label(format!(
            "L = {}, m^2 = {}, lambda = {}: HMC reference {}",
            model.size,
            c.m2,
            c.lambda,
            match &self.reference {
                Some(r) => format!(
                    "<|M|>/V = {:.3} +- {:.3}, <M^2>/V = {:.3} +- {:.3} ({} trajectories)",
                    r.observables.abs_m.mean,
                    r.observables.abs_m.error,
                    r.observables.m2.mean,
                    r.observables.m2.error,
                    hmc_trajectories(model.volume())
                ),
                None => "unavailable".into(),
            }
        ));
        ui.horizontal_top(|ui| {
            ui.vertical(|ui| {
                for run in &self.runs {
                    ui.horizontal(|ui| {
                        ui.colored_label(run.colour, egui::RichText::new(&run.label).strong());
                        ui.label(format!("step {}", run.steps()));
                        if let Some(ms) = run.ms_per_step() {
                            ui.label(format!("{ms:.1} ms a step"));
                        }
                    });
                    ui.horizontal(|ui| {
                        for field in &run.fields {
                            field_ui(ui, field, model.size, 64.0);
                        }
                    })
                    .response
                    .on_hover_text(
                        "Field configurations the flow samples now: blue phi < 0, white 0, red phi > 0 (full colour at |phi| = 2).",
                    );
                    if let Some(e) = &run.estimates {
                        ui.label(format!(
                            "ESS/N {:.3}   IMH acceptance {:.3}   M > 0: {:.2}",
                            e.ess, e.acceptance, e.positive_fraction
                        ));
                        ui.label(format!(
                            "<|M|>/V IMH {:.3} +- {:.3}, reweighted {:.3} +- {:.3}",
                            e.imh.abs_m.mean,
                            e.imh.abs_m.error,
                            e.reweighted.abs_m.mean,
                            e.reweighted.abs_m.error
                        ));
                    }
                    ui.add_space(6.0);
                }
            });
            let flows: Vec<(Color32, &[(f64, f64)])> = self
                .runs
                .iter()
                .filter_map(|r| {
                    r.estimates
                        .as_ref()
                        .map(|e| (r.colour, &e.flow_histogram[..]))
                })
                .collect();
            let hmc = self
                .reference
                .as_ref()
                .map_or(&[][..], |r| &r.observables.histogram[..]);
            let side = (ui.available_width() - 8.0).clamp(200.0, 520.0);
            histogram_ui(ui, hmc, &flows, Vec2::new(side, side * 0.7)).on_hover_text(
                "Magnetization M/V: HMC's reference (grey bars) and each flow's raw samples \
                 (lines, before any correction). A flow that covers one peak only has collapsed.",
            );
        });
    }

    /// The bottom panel: loss, ESS/N, acceptance and M > 0 fraction over steps.
    pub fn curves_ui(&mut self, ui: &mut egui::Ui) {
        let pick = |f: fn(&LabRun) -> &Vec<(usize, f64)>| -> Vec<(Color32, &[(usize, f64)])> {
            self.runs.iter().map(|r| (r.colour, &f(r)[..])).collect()
        };
        let width = ((ui.available_width() - 24.0) / 4.0).max(120.0);
        let size = Vec2::new(width, 130.0);
        ui.horizontal(|ui| {
            lines_ui(
                ui,
                "reverse KL loss (nats)",
                &pick(|r| &r.losses),
                None,
                size,
            )
            .on_hover_text("mean(log q - log p~) of each batch: KL(q || p) - log Z.");
            lines_ui(ui, "ESS/N", &pick(|r| &r.ess), Some((0.0, 1.0)), size).on_hover_text(
                "Effective sample size of the importance weights over N (256 samples).",
            );
            lines_ui(
                ui,
                "IMH acceptance",
                &pick(|r| &r.acceptance),
                Some((0.0, 1.0)),
                size,
            )
            .on_hover_text(
                "Acceptance of independent Metropolis-Hastings with the flow as proposal.",
            );
            lines_ui(
                ui,
                "fraction M > 0",
                &pick(|r| &r.positive),
                Some((0.0, 1.0)),
                size,
            )
            .on_hover_text(
                "1/2 for the symmetric target; near 0 or 1 the flow sees one mode only.",
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lab link restores its settings; what is malformed or out of range
    /// is named and left at the default.
    #[test]
    fn lab_links_round_trip_and_bad_entries_are_named() {
        let s = LabSettings {
            size: 12,
            m2: -3.5,
            lambda: 2.25,
            flow: "radial",
            family: Family::Sinh,
            z2: true,
            learning_rate: 0.001,
            batch: 32,
            seed: 9,
        };
        assert_eq!(LabSettings::from_query(&s.to_query()), (s, Vec::new()));
        let (parsed, ignored) = LabSettings::from_query(
            "?lab=phi4&L=5&m2=nan&lambda=3&family=spline&z2=yes&colour=red",
        );
        assert_eq!(parsed.lambda, 3.0);
        assert_eq!(parsed.size, LabSettings::default().size);
        assert_eq!(parsed.family, LabSettings::default().family);
        assert_eq!(
            ignored,
            ["L=5", "m2=nan", "family=spline", "z2=yes", "colour=red"]
        );
    }
}
