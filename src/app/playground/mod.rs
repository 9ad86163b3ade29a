//! The 2D playground: pick a target and a flow, press play, and watch the
//! density, the samples and the deformed grid change as the flow trains.
//!
//! `settings` (what the user chose, and its URL), `session` (the run and its
//! metrics), `picture` (what the views draw), and one file per panel:
//! `controls` (left), `views` (centre), `curves` (bottom), plus the windows
//! (`explorer`, `layers`, `compare`, `drawing`, `help`) and `files`
//! (uploads, exports, PNGs).

pub mod compare;
pub mod controls;
pub mod curves;
pub mod drawing;
pub mod explorer;
pub mod files;
pub mod gpu_overlay;
pub mod gpu_views;
pub mod help;
pub mod layers;
pub mod model_io;
pub mod picture;
pub mod session;
pub mod settings;
pub mod views;

use super::classroom::{Classroom, Panel, run_bar_ui, side_panels_ui};
use super::devices::Devices;
use super::files::UploadSlot;
use super::host::{CpuReason, GpuOffer};
use crate::bijection::Family;
use crate::flow::FlowModel;
use crate::target::Target;
use eframe::egui;
use session::{Session, Start, Status};
use settings::{Settings, TargetChoice};
use views::Views;
use web_time::{Duration, Instant};

/// A run with this many steps is not set aside by a change of settings
/// without asking first.
const ASK_AFTER_STEPS: usize = 1000;

/// How long a lesson's run waits for a browser's answer to the GPU request
/// before it plays anyway.
const LESSON_WAIT: Duration = Duration::from_secs(3);

/// Below this width (in points) the page takes its narrow layout.
pub const NARROW_WIDTH: f32 = 700.0;

/// A run set aside by a new one: its loss curve stays, greyed, for comparison.
pub struct PreviousRun {
    /// what it was, e.g. "radial, cubic_rational, stack 16, lr 0.01 on rings"
    pub label: String,
    pub losses: Vec<f32>,
}

/// The windows the playground can open.
#[derive(Default)]
struct Windows {
    drawing: Option<drawing::Drawing>,
    explorer: Option<explorer::Explorer>,
    /// the flow cut after its first k maps
    layers: Option<layers::LayerScrubber>,
    /// designs trained side by side
    comparison: Option<compare::Comparison>,
    /// a radial flow edited by hand in the explorer (while paused)
    hand_model: Option<FlowModel<f64>>,
    help: bool,
}

pub struct Playground {
    /// the settings as the controls show them: the learning rate and steps
    /// per frame apply to the run on screen at once, any other change starts
    /// a new run
    settings: Settings,
    session: Option<Session>,
    /// the run before this one, for comparison
    previous: Option<PreviousRun>,
    /// a change of settings waits for the user to confirm setting aside a long run
    asking: bool,
    /// whether this frame takes the narrow layout (a phone)
    narrow: bool,
    /// narrow screens: whether the controls' drawer is open
    drawer_open: bool,
    /// settings that failed to start a run (not tried again each frame)
    failed: Option<Settings>,
    /// why the last reset failed, or what a shared link had that was ignored
    message: Option<String>,
    /// what the last action did (a file saved, a model imported)
    notice: Option<String>,
    /// the density of an uploaded image or a drawing, which the settings'
    /// target names
    custom_target: Option<Target>,
    /// an imported model, and its steps, for the next reset to start from
    imported: Option<(usize, FlowModel<f64>)>,
    /// what the browser's file picker hands back
    upload: UploadSlot,
    views: Views,
    windows: Windows,
    /// the page's GPU
    devices: Devices,
    /// where the user (the checkbox, a link's `gpu=`) chose to train: the
    /// GPU (`true`) or the CPU; unchosen, a GPU is used unless it is a
    /// software adapter ([`Self::prefers_gpu`])
    gpu_choice: Option<bool>,
    /// the page's frame rate, for the readout
    frames_per_second: f64,
    /// a lesson's run opened while the browser is still looking for a GPU:
    /// it plays once the answer is in (so it starts there), or at this time
    play_at: Option<Instant>,
    /// the GPU could not draw the density view (said once; the CPU's picture
    /// is drawn instead)
    heatmap_failed: bool,
}

impl Playground {
    /// The playground for `settings`, paused at step 0, training on the
    /// GPU of `devices` once it is found.
    pub fn new(settings: Settings, devices: Devices) -> Self {
        let mut playground = Self {
            settings,
            session: None,
            previous: None,
            asking: false,
            narrow: false,
            drawer_open: false,
            failed: None,
            message: None,
            notice: None,
            custom_target: None,
            imported: None,
            upload: UploadSlot::default(),
            views: Views::default(),
            windows: Windows::default(),
            devices,
            gpu_choice: None,
            frames_per_second: 0.0,
            play_at: None,
            heatmap_failed: false,
        };
        playground.reset();
        playground
    }

    /// The current training session, if the settings built one.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The settings being edited.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Trains the next runs on `devices` (the first run starts again on them).
    pub fn set_devices(&mut self, devices: Devices) {
        self.devices = devices;
        self.reset();
    }

    /// Shows `message` as a warning (e.g. what a link had that was ignored).
    pub fn warn(&mut self, message: String) {
        self.message = Some(message);
    }

    /// The run before this one, kept for comparison.
    pub fn previous(&self) -> Option<&PreviousRun> {
        self.previous.as_ref()
    }

    /// Where each view was drawn in the last frame ("density", "target", "loss").
    pub fn view_rects(&self) -> &[(&'static str, egui::Rect)] {
        &self.views.rects
    }

    /// Whether a change of settings waits for the user to confirm that the
    /// long run on screen may be set aside.
    pub fn asking(&self) -> bool {
        self.asking
    }

    /// The page's address for the run on screen (an upload or a drawing
    /// cannot travel in a link: the target is left out for them).
    pub fn query(&self) -> Option<String> {
        let compare = self
            .windows
            .comparison
            .as_ref()
            .and_then(|c| c.link_id())
            .map_or(String::new(), |id| {
                format!("&{}={id}", crate::app::query::COMPARE_KEY)
            });
        let gpu = self.gpu_choice.map_or(String::new(), |on| {
            format!(
                "&{}={}",
                crate::app::query::GPU_KEY,
                if on { "on" } else { "off" }
            )
        });
        self.session
            .as_ref()
            .map(|s| s.settings.to_query() + &compare + &gpu)
    }

    /// Starts over from the settings (a new model at step 0); the run on
    /// screen, if it trained, is kept as the previous run.
    pub fn reset(&mut self) {
        self.windows.hand_model = None;
        self.asking = false;
        let previous = self
            .session
            .as_ref()
            .filter(|s| s.steps_done() > 0)
            .map(|s| PreviousRun {
                label: s.settings.describe(),
                losses: s.losses.clone(),
            });
        let start = Start {
            target: match self.settings.target {
                TargetChoice::Preset(_) => None,
                _ => self.custom_target.clone(),
            },
            model: self.imported.take(),
        };
        let offer = self.offer();
        match Session::new(
            self.settings.clone(),
            start,
            offer,
            self.devices.cpu_threads,
        ) {
            Ok(session) => {
                self.session = Some(session);
                self.previous = previous.or(self.previous.take());
                self.message = None;
                self.failed = None;
            }
            Err(e) => {
                self.message = Some(format!("Could not set up this experiment: {e}"));
                self.failed = Some(self.settings.clone());
            }
        }
        self.views.forget_textures();
    }

    /// Applies the settings the controls show to the run on screen: the
    /// learning rate and steps per frame at once, anything else by starting a
    /// new run (playing if this one played), once no slider is being dragged
    /// and, for a long run, once the user agrees.
    fn apply_settings(&mut self, ui: &egui::Ui) {
        let Some(session) = &mut self.session else {
            return;
        };
        if session.settings.learning_rate != self.settings.learning_rate {
            session.set_learning_rate(self.settings.learning_rate);
        }
        session.settings.steps_per_frame = self.settings.steps_per_frame;
        if !self.settings.needs_new_run(&session.settings) {
            self.asking = false;
            return;
        }
        if self.asking
            || self.failed.as_ref() == Some(&self.settings)
            || ui.input(|i| i.pointer.any_down())
        {
            return;
        }
        if session.steps_done() >= ASK_AFTER_STEPS {
            self.asking = true;
            return;
        }
        self.start_new_run();
    }

    /// A new run from the settings, playing if the one it replaces played.
    fn start_new_run(&mut self) {
        let playing = self
            .session
            .as_ref()
            .is_some_and(|s| s.status == Status::Running);
        self.reset();
        if let Some(session) = &mut self.session
            && playing
        {
            session.status = Status::Running;
        }
    }

    /// Keeps the run on screen: the controls go back to its settings.
    fn keep_run(&mut self) {
        if let Some(session) = &self.session {
            self.settings = session.settings.clone();
        }
        self.asking = false;
    }

    /// Plays or pauses; a pause redraws the views where training stopped.
    pub fn toggle_play(&mut self) {
        if let Some(s) = &mut self.session {
            s.status = match s.status {
                Status::Running => Status::Paused,
                _ => Status::Running,
            };
            if s.status == Status::Paused {
                s.refresh_picture();
            }
        }
    }

    /// A lesson's experiment: a run of `settings`, playing, with the windows
    /// closed.
    pub fn start_lesson_run(&mut self, settings: Settings) {
        self.windows = Windows::default();
        self.settings = settings;
        self.reset();
        // a browser answers the GPU request between frames, and a run moves
        // to a GPU found late only before its first step (that move starts
        // the run again, and the wait carries over to it)
        if cfg!(target_arch = "wasm32") && self.devices.starting() {
            self.play_at = Some(Instant::now() + LESSON_WAIT);
        } else {
            self.play();
        }
    }

    /// Plays the run on screen.
    fn play(&mut self) {
        self.play_at = None;
        if let Some(session) = &mut self.session {
            session.status = Status::Running;
        }
    }

    /// Plays a lesson's run once the GPU search is over, or its wait is.
    fn play_when_settled(&mut self) {
        if let Some(at) = self.play_at
            && (!self.devices.starting() || Instant::now() >= at)
        {
            self.play();
        }
    }

    /// Opens the bijection explorer on `family`'s identity map, the run
    /// paused beneath it.
    pub fn open_explorer(&mut self, family: Family) {
        self.pause();
        self.windows.explorer = Some(explorer::Explorer::for_family(family));
    }

    /// The family the bijection explorer shows, while it is open.
    pub fn explorer_family(&self) -> Option<Family> {
        self.windows.explorer.as_ref().map(|e| e.family())
    }

    /// Whether the drawing window is open.
    pub fn drawing_open(&self) -> bool {
        self.windows.drawing.is_some()
    }

    /// Opens the drawing window on a blank canvas, the run paused beneath it.
    pub fn open_drawing(&mut self) {
        self.pause();
        self.windows.drawing = Some(drawing::Drawing::default());
    }

    /// One training step, then paused.
    pub fn single_step(&mut self) {
        if let Some(s) = &mut self.session {
            s.single_step();
        }
    }

    /// Pauses a running run (the page switched away).
    pub fn pause(&mut self) {
        if let Some(s) = &mut self.session
            && s.status == Status::Running
        {
            s.status = Status::Paused;
        }
    }

    /// The keys of the playground: space, s, r and ?.
    fn keyboard(&mut self, ui: &egui::Ui) {
        if ui.ctx().egui_wants_keyboard_input() {
            return;
        }
        let (space, s, r, help) = ui.input(|i| {
            (
                i.key_pressed(egui::Key::Space),
                i.key_pressed(egui::Key::S),
                i.key_pressed(egui::Key::R),
                i.key_pressed(egui::Key::Questionmark),
            )
        });
        if space {
            self.toggle_play();
        }
        if s {
            self.single_step();
        }
        if r {
            self.reset();
        }
        if help {
            self.windows.help = !self.windows.help;
        }
    }

    /// The GPU a new run is offered, or why none: a software adapter (an
    /// emulated GPU, 10 to 40 times slower than this page's CPU trainer where
    /// measured) only when the user asked for the GPU.
    pub(super) fn offer(&self) -> GpuOffer {
        self.devices.offer(self.prefers_gpu())
    }

    /// Whether new runs are offered the GPU (once one is found): as the user
    /// chose, else unless the one found is a software adapter.
    pub fn prefers_gpu(&self) -> bool {
        self.gpu_choice
            .unwrap_or_else(|| self.devices.context().is_none_or(|g| !g.software))
    }

    /// Trains on the GPU (`true`) or the CPU from now on, as the user chose
    /// (a software adapter included); the run on screen starts again there.
    pub fn choose_gpu(&mut self, gpu: bool) {
        self.gpu_choice = Some(gpu);
        self.reset();
    }

    /// Starts a run that has not started and was made before a GPU was
    /// found anew, so it goes onto the GPU or notes why it stays on the CPU
    /// ([`Self::offer`]).
    fn adopt_gpu(&mut self) {
        if let Some(session) = &self.session
            && self.devices.context().is_some()
            && session.steps_done() == 0
            && !session.awaiting_worker()
            && session.cpu_reason() == Some(&CpuReason::NoGpu)
        {
            self.reset();
        }
    }

    /// Moves the run to the GPU (or the CPU), saying what happened.
    fn move_run(&mut self, to_gpu: bool) {
        let Some(session) = &mut self.session else {
            return;
        };
        match session.move_to(self.devices.offer(to_gpu)) {
            Ok(()) => {
                self.notice = Some(format!(
                    "The run continues on {} from step {}.",
                    session.device(),
                    session.steps_done()
                ));
            }
            Err(e) => self.message = Some(format!("The run could not move: {e}")),
        }
        self.views.forget_textures();
    }

    /// When the GPU device is lost (a driver reset, the browser reclaiming
    /// it), the run goes on on the CPU from the model the views show.
    fn survive_a_lost_gpu(&mut self) {
        let Some(why) = self.session.as_ref().and_then(Session::gpu_lost) else {
            return;
        };
        self.devices
            .lose(format!("the GPU device was lost ({why})"));
        let offer = Err(CpuReason::Lost(why.clone()));
        match self.session.as_mut().map(|s| s.move_to(offer)) {
            Some(Ok(())) => {
                let step = self.session.as_ref().map_or(0, Session::steps_done);
                self.message = Some(format!(
                    "The GPU device was lost ({why}). Training goes on on the CPU from step {step}; 'Look for a GPU again' tries to get one back."
                ));
            }
            _ => {
                self.reset();
                self.message = Some(format!(
                    "The GPU device was lost ({why}) before the model could be saved; the run starts over on the CPU."
                ));
            }
        }
        self.views.forget_textures();
    }

    /// One frame of the playground: input, training, then its panels and windows.
    pub fn ui(
        &mut self,
        ui: &mut egui::Ui,
        budget: Duration,
        frames_per_second: f64,
        classroom: &mut Classroom,
    ) {
        self.frames_per_second = frames_per_second;
        self.keyboard(ui);
        self.take_files(ui.ctx());
        self.finish_screenshot(ui.ctx());
        self.adopt_gpu();
        self.play_when_settled();
        self.survive_a_lost_gpu();
        self.compare_frame(ui.ctx(), budget);
        if let Some(session) = &mut self.session {
            session.frame(budget);
            if session.status == Status::Running || session.wants_frame() {
                ui.ctx().request_repaint();
            } else if session.on_gpu() || session.awaiting_worker() {
                // GPU and worker results arrive asynchronously
                ui.ctx().request_repaint_after(Duration::from_millis(100));
            }
        }
        self.views.begin_frame();
        // the windows stay inside the page's own area (a lesson's panel
        // stands beside it)
        let area = ui.available_rect_before_wrap();
        self.narrow = ui.available_width() < NARROW_WIDTH;
        if self.narrow {
            self.narrow_ui(ui, classroom);
        } else {
            self.wide_ui(ui, classroom);
        }
        let ctx = ui.ctx().clone();
        self.help_ui(&ctx, area);
        self.drawing_ui(&ctx, area);
        self.explorer_ui(&ctx, area);
        self.layers_ui(&ctx, area);
        self.comparison_ui(&ctx, area);
        self.save_requested_view(&ctx);
        self.apply_settings(ui);
    }

    /// A wide screen: the controls at the left, the loss curves at the
    /// bottom, the views in the middle (less what a classroom link hides).
    fn wide_ui(&mut self, ui: &mut egui::Ui, classroom: &mut Classroom) {
        side_panels_ui(
            ui,
            classroom,
            self,
            Self::controls_ui,
            Self::run_buttons_ui,
            Self::curves_ui,
        );
        let show_target = classroom.shows(Panel::Target);
        egui::CentralPanel::default().show(ui, |ui| self.views_ui(ui, show_target));
    }

    /// A narrow screen (a phone): the run's buttons at the top with the
    /// controls in a drawer under them, and the views and curves stacked in
    /// one scrolling column, so every view can be reached.
    fn narrow_ui(&mut self, ui: &mut egui::Ui, classroom: &mut Classroom) {
        if !classroom.shows(Panel::Controls) {
            self.drawer_open = false;
            run_bar_ui(ui, classroom, |ui| self.run_buttons_ui(ui));
        } else {
            self.drawer_ui(ui);
        }
        let (show_target, show_curves) = (
            classroom.shows(Panel::Target),
            classroom.shows(Panel::Curves),
        );
        egui::CentralPanel::default().show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                self.views_ui(ui, show_target);
                if show_curves {
                    ui.separator();
                    self.curves_ui(ui);
                }
            });
        });
    }

    /// The phone's drawer: "Controls" and the run's buttons, the controls
    /// under them when open.
    fn drawer_ui(&mut self, ui: &mut egui::Ui) {
        let drawer_height = 0.6 * ui.available_height();
        // sized to its content every frame: open, it grows; closed, it is one row
        egui::Panel::top("drawer").resizable(false).show(ui, |ui| {
            ui.horizontal(|ui| {
                let label = if self.drawer_open {
                    "Hide controls"
                } else {
                    "Controls"
                };
                if ui.button(label).clicked() {
                    self.drawer_open = !self.drawer_open;
                }
                self.run_buttons_ui(ui);
            });
            if self.drawer_open {
                egui::ScrollArea::vertical()
                    .max_height(drawer_height)
                    .min_scrolled_height(drawer_height)
                    .show(ui, |ui| self.controls_ui(ui));
            }
        });
    }

    /// The run's progress for the browser tab's title (the end-to-end tests
    /// read it).
    pub fn title(&self) -> Option<String> {
        if let Some(title) = self.windows.comparison.as_ref().and_then(|c| c.title()) {
            return Some(title);
        }
        let session = self.session.as_ref()?;
        let device = match (session.on_gpu(), session.in_worker()) {
            (true, _) => "GPU",
            (false, true) => "CPU worker",
            (false, false) => "CPU",
        };
        let name = session.settings.target.label();
        let step = session.steps_done();
        Some(match session.losses.len() {
            0 => format!("Flow Playground | {name} | {device} | step {step}"),
            n => {
                let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
                let k = n.min(20);
                format!(
                    "Flow Playground | {name} | {device} | step {step} | loss {:.3} (first {:.3})",
                    mean(&session.losses[n - k..]),
                    mean(&session.losses[..k])
                )
            }
        })
    }
}
