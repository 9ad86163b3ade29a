//! The phi^4 lab: flows trained on the lattice field by reverse KL, live, next
//! to an HMC reference: field configurations as heat maps, the magnetization
//! histogram of flow samples over HMC's, and ESS/N, IMH acceptance and the
//! fraction of samples with M > 0 over training. "Compare" trains an affine
//! coupling flow, an analytic-family one and a Z2-equivariant one side by
//! side on the same couplings, so mode collapse and its cure are seen.
//!
//! Runs train on the GPU where the page has a hardware one (a software
//! adapter is offered, not chosen) and on the CPU otherwise, through the
//! app's trainer host; either way the measurements are made on the CPU from
//! 256 flow samples. `settings` (and the URL), `run` (one flow), `controls`
//! (left panel), `views` (centre and bottom) and `layers` (a flow layer by
//! layer).

pub mod controls;
pub mod layers;
pub mod run;
pub mod settings;
pub mod views;

use super::classroom::{Classroom, Panel, side_panels_ui};
use super::devices::Devices;
use super::files::{self, ViewSaver};
use super::host::{CpuReason, GpuOffer, HostSpec, Progress};
use super::widgets::notes::dismissable_warning_ui;
use crate::bijection::Family;
use crate::gpu::GpuContext;
use crate::mcmc::hmc::HmcSettings;
use crate::phi4::design::Design;
use crate::phi4::estimates::{estimate_from_samples, flow_samples};
use crate::phi4::reference::{Phi4Reference, reference};
use crate::rng::Rng;
use crate::run::bijx_script::bijx_script;
use crate::target::Target;
use crate::target::phi4::Phi4;
use crate::train::config::{Precision, RunConfig, initial_model};
use crate::train::{Loss, TrainSettings};
use eframe::egui::{self, Color32};
use run::{GpuSamples, LabRun, SampleJob};
use settings::LabSettings;
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

/// Line colours of the runs (affine, analytic, Z2 in a comparison).
const COLOURS: [Color32; 3] = [
    Color32::from_rgb(230, 120, 50),
    Color32::from_rgb(70, 150, 230),
    Color32::from_rgb(90, 190, 90),
];

/// The lab: its settings, the runs training side by side, and the reference.
pub struct Phi4Lab {
    /// the settings as the controls show them (a change starts the runs
    /// again at once; the learning rate reaches the runs on screen)
    pub settings: LabSettings,
    /// the settings the runs on screen started from
    applied: Option<LabSettings>,
    /// settings that failed to start (not tried again each frame)
    failed: Option<LabSettings>,
    /// the theory the runs train on
    model: Option<Phi4>,
    /// one run, or the three of a comparison
    pub runs: Vec<LabRun>,
    /// HMC on the runs' lattice and couplings
    pub reference: Option<Phi4Reference>,
    /// whether the runs train each frame
    pub running: bool,
    /// why the last reset failed, or what its link had that was ignored
    pub message: Option<String>,
    /// what the last action did (a PNG saved)
    pub notice: Option<String>,
    /// "save PNG" was pressed: the views are saved after this frame
    save_asked: bool,
    saver: ViewSaver,
    /// the page's GPU
    devices: Devices,
    /// the GPU the runs were offered when they started
    offered: Option<GpuContext>,
    /// whether new runs train on the GPU when there is one (not at first on a
    /// software adapter: emulated, the lattice kernels run far slower than
    /// the CPU trainer, 7 s against 45 ms a step in headless Chromium)
    pub prefer_gpu: bool,
    /// the designs of the runs (to start them again on a GPU found late)
    designs: Vec<Design>,
    /// the "Layer by layer" window, while open
    layers: Option<layers::LabLayers>,
    rng: Rng,
}

impl Phi4Lab {
    /// The lab for `settings`: one run, paused at step 0, and its HMC
    /// reference; runs train on the page's GPU where it has one.
    pub fn new(settings: LabSettings, devices: Devices) -> Self {
        let prefer_gpu = devices.context().is_none_or(|g| !g.software);
        let mut lab = Self {
            settings,
            applied: None,
            failed: None,
            model: None,
            runs: Vec::new(),
            reference: None,
            running: false,
            message: None,
            notice: None,
            save_asked: false,
            saver: ViewSaver::default(),
            layers: None,
            offered: devices.context(),
            devices,
            prefer_gpu,
            designs: Vec::new(),
            rng: Rng::seeded(7),
        };
        lab.reset();
        lab
    }

    /// The GPU a new run is offered, or why none (a lost one is none).
    fn offer(&self) -> GpuOffer {
        match self.devices.context() {
            Some(g) if g.lost().is_some() => Err(CpuReason::NoGpu),
            _ => self.devices.offer(self.prefer_gpu),
        }
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
        let s = LabSettings {
            flow: crate::flow::FlowKind::Lattice,
            ..self.settings.clone()
        };
        let family = if s.family == Family::Affine {
            Family::CubicRational
        } else {
            s.family
        };
        let designs = [
            s.design(Family::Affine, false),
            s.design(family, false),
            s.design(family, true),
        ]
        .into_iter()
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
                self.applied = Some(self.settings.clone());
                self.failed = None;
                self.offered = self.devices.context();
                for k in 0..self.runs.len() {
                    self.measure_on_cpu(k);
                }
            }
            Err(e) => {
                self.message = Some(e);
                self.failed = Some(self.settings.clone());
            }
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
                threads: self.devices.cpu_threads,
            },
            precision: Precision::F32,
            eval_samples: MEASURE_SAMPLES,
        };
        let spec = HostSpec {
            model: initial_model(&config)?,
            target: config.target,
            settings: config.settings,
            fixed_centre: design.flow.fixed_centre(),
        };
        LabRun::new(design.label(), colour, spec, self.offer())
    }

    /// Trains every run for about `budget`: GPU runs take in what their last
    /// task returned and start the next (with the latent fields to sample
    /// when a measurement is due); CPU runs share the budget, each measured
    /// every [`MEASURE_EVERY`] steps.
    pub fn train_for(&mut self, budget: Duration) {
        for k in 0..self.runs.len() {
            if self.runs[k].on_gpu() {
                self.gpu_frame(k, budget);
            } else if self.runs[k].host.in_worker() {
                self.worker_frame(k);
            }
        }
        if !self.running {
            return;
        }
        if self.runs.iter().all(|r| r.stopped.is_some()) {
            self.running = false;
            return;
        }
        let start = Instant::now();
        loop {
            let active: Vec<usize> = (0..self.runs.len())
                .filter(|&k| {
                    let run = &self.runs[k];
                    !run.on_gpu() && !run.host.in_worker() && run.stopped.is_none()
                })
                .collect();
            let spent = start.elapsed();
            if active.is_empty() || spent >= budget {
                break;
            }
            let share = (budget - spent) / active.len() as u32;
            for k in active {
                let run = &mut self.runs[k];
                let to_measurement = MEASURE_EVERY - run.steps() % MEASURE_EVERY;
                let progress = run.host.frame(to_measurement, share, None);
                run.take(progress);
                if run.steps().is_multiple_of(MEASURE_EVERY) {
                    self.measure_on_cpu(k);
                }
            }
        }
    }

    /// One frame of GPU run `k`: what its last task returned, then the next
    /// task's steps and, when a measurement is due, the latent fields to sample.
    fn gpu_frame(&mut self, k: usize, budget: Duration) {
        let Some(model) = self.model else { return };
        let running = self.running;
        let run = &mut self.runs[k];
        if run.host.busy() {
            return;
        }
        if let Some(why) = run.host.gpu_lost() {
            run.stopped.get_or_insert(format!(
                "the GPU device was lost ({why}); Reset trains on the CPU"
            ));
            return;
        }
        let done = run.steps();
        let due = run
            .measured_at
            .is_none_or(|at| done / MEASURE_EVERY > at / MEASURE_EVERY);
        let job = due.then(|| {
            run.measured_at = Some(done);
            SampleJob {
                latent: (0..MEASURE_SAMPLES * model.volume())
                    .map(|_| self.rng.normal() as f32)
                    .collect(),
            }
        });
        let steps = if running && run.stopped.is_none() {
            MAX_GPU_STEPS
        } else {
            0
        };
        let progress = run.host.frame(steps, budget, job);
        if let Some(samples) = run.take(progress) {
            self.record(k, samples.step, &samples.fields, &samples.log_q);
        }
    }

    /// One frame of run `k` in a worker: what it sent, then leave to train
    /// up to the next measurement step, where it stops and sends its
    /// parameters. When they come the worker is asked for the measurement's
    /// flow samples before it is let on towards the next (so it pushes them
    /// through the measured step's flow), and they are measured here when
    /// they come: the page's thread pushes no sample through a flow.
    fn worker_frame(&mut self, k: usize) {
        // what came, with no new grant yet
        let progress = self.runs[k].host.frame(0, Duration::ZERO, None);
        self.take_from_worker(k, progress);
        let run = &mut self.runs[k];
        let steps = if self.running && run.stopped.is_none() {
            MEASURE_EVERY - run.steps() % MEASURE_EVERY
        } else {
            // paused: no further than heard
            run.host.halt();
            0
        };
        let progress = run.host.frame(steps, Duration::ZERO, None);
        self.take_from_worker(k, progress);
    }

    /// A worker run's replies: its samples measured, and at a measurement
    /// step (its parameters just came) the samples asked for.
    fn take_from_worker(&mut self, k: usize, progress: Progress<GpuSamples>) {
        let fresh = progress.fresh_model;
        if let Some(samples) = self.runs[k].take(progress) {
            self.record(k, samples.step, &samples.fields, &samples.log_q);
        }
        let Some(model) = self.model else {
            return;
        };
        let run = &mut self.runs[k];
        let Some(step) = run.host.model().map(|(step, _)| step) else {
            return;
        };
        let due = fresh
            && step > 0
            && step.is_multiple_of(MEASURE_EVERY)
            && run.measured_at != Some(step)
            && !run.host.sampling_in_worker();
        if due {
            let latent = (0..MEASURE_SAMPLES * model.volume())
                .map(|_| self.rng.normal())
                .collect();
            if run.host.sample_in_worker(latent) {
                run.measured_at = Some(step);
            }
        }
    }

    /// Measures CPU run `k` now: its samples' ESS/N, acceptance, M > 0
    /// fraction, corrected observables and a few configurations.
    fn measure_on_cpu(&mut self, k: usize) {
        let run = &mut self.runs[k];
        let Some((step, model)) = run.host.model() else {
            return;
        };
        if run.measured_at == Some(step) {
            return;
        }
        run.measured_at = Some(step);
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
            Err(e) => run.stopped = Some(e.to_string()),
        }
        run.fields = fields
            .chunks(model.volume())
            .take(FIELDS)
            .map(<[f64]>::to_vec)
            .collect();
    }

    /// Takes the page's GPU as it is now: one found after the lab opened (a
    /// browser answers late, often after a link's lab has started) starts
    /// the runs again there if they are still in their first steps.
    pub fn adopt_gpu(&mut self) {
        let gpu = self.devices.context().filter(|g| g.lost().is_none());
        let found = gpu.is_some() && self.offered.is_none();
        if !found {
            return;
        }
        self.prefer_gpu = gpu.as_ref().is_some_and(|g| !g.software);
        let early = self
            .runs
            .iter()
            .all(|r| r.steps() < MEASURE_EVERY && !r.on_gpu());
        if self.prefer_gpu && early && !self.designs.is_empty() {
            let running = self.running;
            self.start(Ok(self.designs.clone()));
            self.running = running && self.message.is_none();
        }
        self.offered = gpu;
    }

    /// Plays or pauses (a run that stopped stays stopped).
    pub fn toggle_play(&mut self) {
        self.running = !self.running && self.runs.iter().any(|r| r.stopped.is_none());
    }

    /// Lets a diverged run go on from its last good state with half the step size.
    fn resume(&mut self, k: usize) {
        match self.runs[k].resume() {
            Ok(()) => self.running = true,
            Err(e) => self.message = Some(format!("{}: {e}", self.runs[k].label)),
        }
    }

    /// Saves run `k`'s model as a Python script that rebuilds it in bijx and
    /// checks it there: the current model on the CPU, the last checkpoint on
    /// the GPU (whose model stays on the device); a diverged model is refused.
    fn export_bijx_script(&mut self, k: usize) {
        let run = &self.runs[k];
        if let Some(why) = &run.stopped {
            self.message = Some(format!(
                "{}: cannot export as Python: the run stopped ({why}). Go on from its last good state first.",
                run.label
            ));
            return;
        }
        let Some((step, model)) = run.host.model().or_else(|| run.host.checkpoint().cloned())
        else {
            self.notice = Some("No model to export yet; train a few steps first.".into());
            return;
        };
        let s = self.applied.as_ref().unwrap_or(&self.settings);
        let origin = format!(
            "trained in the phi^4 lab ({}) at L = {}, m^2 = {}, lambda = {} for {step} steps",
            run.label, s.size, s.m2, s.lambda
        );
        match bijx_script(&model, &origin) {
            Ok(script) => {
                let name = format!("flowplay-phi4-L{}-step{step}-bijx.py", s.size);
                self.notice = Some(
                    match files::save(&name, "text/x-python", script.as_bytes()) {
                        Ok(done) => format!("{done} (run it with Python and bijx 1.3.2)."),
                        Err(e) => e,
                    },
                );
            }
            Err(e) => self.message = Some(format!("{}: cannot export as Python: {e}.", run.label)),
        }
    }

    /// Applies the settings the controls show at once: the learning rate to
    /// the runs on screen, anything else by starting the runs again (the
    /// comparison if one is on screen), playing if they played, once no
    /// slider is being dragged.
    fn apply_settings(&mut self, ui: &egui::Ui) {
        let Some(applied) = &self.applied else {
            return;
        };
        let same = LabSettings {
            learning_rate: applied.learning_rate,
            ..self.settings.clone()
        } == *applied;
        if same
            || self.failed.as_ref() == Some(&self.settings)
            || ui.input(|i| i.pointer.any_down())
        {
            return;
        }
        let running = self.running;
        if self.runs.len() > 1 {
            self.compare();
        } else {
            self.reset();
        }
        self.running = running && self.message.is_none();
    }

    /// The lab's address: the settings of the runs on screen.
    pub fn query(&self) -> String {
        self.applied.as_ref().unwrap_or(&self.settings).to_query()
    }

    /// The lab's keys: space plays or pauses, r resets.
    fn keyboard(&mut self, ui: &egui::Ui) {
        if ui.ctx().egui_wants_keyboard_input() {
            return;
        }
        let (space, r) =
            ui.input(|i| (i.key_pressed(egui::Key::Space), i.key_pressed(egui::Key::R)));
        if space {
            self.toggle_play();
        }
        if r {
            self.reset();
        }
    }

    /// One frame of the lab: input, training, then its panels.
    pub fn ui(&mut self, ui: &mut egui::Ui, budget: Duration, classroom: &mut Classroom) {
        if let Some(done) = self.saver.finish(ui.ctx()) {
            self.notice = Some(done);
        }
        self.keyboard(ui);
        self.adopt_gpu();
        self.train_for(budget);
        if self.running {
            ui.ctx().request_repaint();
        } else if self
            .runs
            .iter()
            .any(|r| r.host.busy() || r.host.awaiting_worker())
        {
            ui.ctx().request_repaint_after(Duration::from_millis(50));
        }
        side_panels_ui(
            ui,
            classroom,
            self,
            Self::controls_ui,
            Self::run_buttons_ui,
            Self::curves_ui,
        );
        let show_controls = classroom.shows(Panel::Controls);
        let views = egui::CentralPanel::default().show(ui, |ui| {
            if !show_controls {
                // the controls hold the lab's messages: above the views instead
                dismissable_warning_ui(ui, &mut self.message);
            }
            egui::ScrollArea::vertical().show(ui, |ui| self.views_ui(ui))
        });
        if std::mem::take(&mut self.save_asked) {
            let step = self.runs.first().map_or(0, LabRun::steps);
            let file = format!("flowplay-phi4-step{step}.png");
            self.saver.request(ui.ctx(), file, views.response.rect);
        }
        let ctx = ui.ctx().clone();
        self.layers_ui(&ctx);
        self.apply_settings(ui);
    }

    /// The first run's progress for the browser tab's title (the end-to-end
    /// tests read it).
    pub fn title(&self) -> String {
        let mut title = String::from("Flow Playground | phi^4");
        if let Some(run) = self.runs.first() {
            title += &format!(" | step {}", run.steps());
            if let Some(e) = &run.estimates {
                title += &format!(" | ESS/N {:.3}", e.ess);
            }
            if let Some(ms) = run.ms_per_step() {
                title += &format!(" | {ms:.1} ms a step");
            }
            title += match (run.on_gpu(), run.host.in_worker()) {
                (true, _) => " | GPU",
                (false, true) => " | CPU worker",
                (false, false) => " | CPU",
            };
        }
        title
    }
}
