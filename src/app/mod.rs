//! The playground: the eframe app that trains flows live and shows what they do.
//! `settings` (what the user chose, and the URL), `session` (the training run
//! and what its views draw), `views` (the pictures), and here the panels.

pub mod drawing;
pub mod explorer;
pub mod files;
mod lab_trainer;
pub mod model_io;
pub mod phi4_lab;
pub mod phi4_views;
pub mod session;
pub mod settings;
pub mod views;

use crate::flow::FlowModel;
use crate::gpu::GpuContext;
use crate::target::{ImageDensity, Target};
use eframe::egui::{self, Key, RichText, Vec2};
use files::UploadSlot;
use session::{Session, Start, Status};
use settings::{FAMILIES, FLOW_KINDS, Settings, lessons, target_names};
use std::cell::RefCell;
use std::rc::Rc;
use views::{Overlays, Scale};
use web_time::{Duration, Instant};

/// The share of a frame training may take.
const TRAIN_BUDGET: Duration = Duration::from_millis(14);

pub struct Playground {
    /// the settings being edited (applied by Reset)
    settings: Settings,
    session: Option<Session>,
    /// why the last reset failed, or what a shared link had that was ignored
    message: Option<String>,
    /// what the last action did (a file saved, a model imported)
    notice: Option<String>,
    /// the chosen lesson's settings and what it asks the user to watch
    lesson: Option<(Settings, &'static str)>,
    /// an uploaded image or a drawing as the target (its name for the user),
    /// used while the settings' target is "image"
    custom_target: Option<(String, Target)>,
    /// an imported model for the next reset to start from
    imported: Option<FlowModel<f64>>,
    /// what the browser's file picker hands back
    upload: UploadSlot,
    /// the drawing window, when open
    drawing: Option<drawing::Drawing>,
    /// the bijection explorer, when open
    explorer: Option<explorer::Explorer>,
    /// a radial flow edited by hand (while paused), ahead of the views
    hand_model: Option<FlowModel<f64>>,
    /// where each view was drawn last frame (for "save PNG")
    view_rects: Vec<(&'static str, egui::Rect)>,
    /// a view the user asked to save
    save_request: Option<&'static str>,
    /// a screenshot on its way, and the view to cut from it
    screenshot: Option<(&'static str, egui::Rect, Screenshot)>,
    texture: Option<egui::TextureHandle>,
    /// the session picture the texture shows
    texture_version: u64,
    target_texture: Option<egui::TextureHandle>,
    scale: Scale,
    overlays: Overlays,
    last_picture: Instant,
    /// frames per second, smoothed
    fps: f64,
    last_frame: Option<Instant>,
    show_help: bool,
    /// the page title last set (web: the tab shows the run's progress)
    title: String,
    /// the GPU, once found (in a browser that takes a moment)
    gpu: Rc<RefCell<GpuStatus>>,
    /// train on the GPU when there is one (the user may choose the CPU)
    prefer_gpu: bool,
    /// the phi^4 lab, once opened (kept while the 2D playground is shown)
    lab: Option<phi4_lab::Phi4Lab>,
    /// whether the page shows the phi^4 lab rather than the 2D playground
    lab_open: bool,
}

/// A metric's (step, value) points.
type Series = Vec<(usize, f64)>;

/// Where a requested screenshot arrives (the renderer answers after the frame).
type Screenshot = std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<egui::ColorImage>>>>;

/// Whether the app has a GPU to train on.
pub enum GpuStatus {
    Starting,
    Ready(GpuContext),
    Unavailable(String),
}

impl Playground {
    /// The app with settings from the page's URL (on the web) or the defaults,
    /// looking for a GPU to train on.
    pub fn new(_cc: &eframe::CreationContext<'_>) -> Self {
        let query = page_query();
        if query.contains("lab=phi4") {
            let (lab, ignored) = phi4_lab::LabSettings::from_query(&query);
            let mut app = Self::with_settings(Settings::default());
            app.find_gpu();
            app.open_lab(Some(lab));
            if !ignored.is_empty() {
                app.message = Some(format!(
                    "The link's {} was not understood and was ignored.",
                    ignored.join(", ")
                ));
            }
            return app;
        }
        let (settings, ignored) = Settings::from_query(&query);
        let mut app = Self::with_settings(settings);
        app.find_gpu();
        if !ignored.is_empty() {
            app.message = Some(format!(
                "The link's {} was not understood and was ignored.",
                ignored.join(", ")
            ));
        }
        app
    }

    /// The app for `settings`, paused at step 0.
    pub fn with_settings(settings: Settings) -> Self {
        let mut app = Self {
            settings,
            session: None,
            message: None,
            notice: None,
            lesson: None,
            custom_target: None,
            imported: None,
            upload: UploadSlot::default(),
            drawing: None,
            explorer: None,
            hand_model: None,
            view_rects: Vec::new(),
            save_request: None,
            screenshot: None,
            texture: None,
            texture_version: 0,
            target_texture: None,
            scale: Scale::Log,
            overlays: Overlays {
                grid: true,
                samples: true,
            },
            last_picture: Instant::now(),
            fps: 0.0,
            last_frame: None,
            show_help: false,
            title: String::new(),
            gpu: Rc::new(RefCell::new(GpuStatus::Starting)),
            prefer_gpu: true,
            lab: None,
            lab_open: false,
        };
        app.reset();
        app
    }

    /// Looks for a GPU (natively at once; in a browser the answer arrives
    /// later and the run moves to the GPU if it has not started).
    pub fn find_gpu(&mut self) {
        let slot = Rc::clone(&self.gpu);
        let found = async move {
            let status = match GpuContext::new().await {
                Ok(ctx) => GpuStatus::Ready(ctx),
                Err(e) => GpuStatus::Unavailable(e),
            };
            *slot.borrow_mut() = status;
        };
        #[cfg(target_arch = "wasm32")]
        wasm_bindgen_futures::spawn_local(found);
        #[cfg(not(target_arch = "wasm32"))]
        pollster::block_on(found);
        self.adopt_gpu();
    }

    /// The GPU context to train on, if there is one and the user wants it.
    fn gpu_context(&self) -> Option<GpuContext> {
        match &*self.gpu.borrow() {
            GpuStatus::Ready(ctx) if self.prefer_gpu => Some(ctx.clone()),
            _ => None,
        }
    }

    /// Moves a CPU run that has not started onto a GPU that has just been found.
    fn adopt_gpu(&mut self) {
        let ready = self.gpu_context().is_some();
        if ready
            && let Some(session) = &self.session
            && !session.on_gpu()
            && session.steps_done() == 0
            && !session.backend.contains("the GPU cannot")
        {
            self.reset();
        }
    }

    /// Moves the run to `gpu` (or the CPU), saying what happened.
    fn move_run(&mut self, gpu: Option<GpuContext>) {
        let Some(session) = &mut self.session else {
            return;
        };
        match session.move_to(gpu) {
            Ok(()) => {
                self.notice = Some(format!(
                    "The run continues on {} from step {}.",
                    session.backend,
                    session.steps_done()
                ));
            }
            Err(e) => self.message = Some(format!("The run could not move: {e}")),
        }
        self.texture = None;
    }

    /// When the GPU device is lost (a driver reset, the browser reclaiming
    /// it), the run goes on on the CPU from the model the views show.
    fn survive_a_lost_gpu(&mut self) {
        let Some(why) = self.session.as_ref().and_then(Session::gpu_lost) else {
            return;
        };
        *self.gpu.borrow_mut() = GpuStatus::Unavailable(format!("the GPU device was lost ({why})"));
        let moved = self.session.as_mut().map(|s| s.move_to(None));
        match moved {
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
        self.texture = None;
    }

    /// Why there is no GPU, if there is none.
    fn gpu_note(&self) -> Option<String> {
        match &*self.gpu.borrow() {
            GpuStatus::Starting => Some("looking for a GPU...".into()),
            GpuStatus::Unavailable(e) => Some(format!("no GPU: {e}")),
            GpuStatus::Ready(_) => None,
        }
    }

    /// The current training session, if the settings built one.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// Starts over from the edited settings (a new model at step 0).
    pub fn reset(&mut self) {
        self.hand_model = None;
        let start = Start {
            target: self
                .custom_target
                .as_ref()
                .filter(|_| self.settings.target == "image")
                .map(|(_, target)| target.clone()),
            model: self.imported.take(),
        };
        match Session::new(self.settings.clone(), start, self.gpu_context()) {
            Ok(session) => {
                self.session = Some(session);
                self.message = None;
            }
            Err(e) => self.message = Some(format!("Could not set up this experiment: {e}")),
        }
        self.texture = None;
        self.target_texture = None;
    }

    fn toggle_play(&mut self) {
        if let Some(s) = &mut self.session {
            s.status = match s.status {
                Status::Running => Status::Paused,
                _ => Status::Running,
            };
            if s.status == Status::Paused {
                // the views and metrics show where training stopped
                s.refresh_picture();
            }
        }
    }

    fn single_step(&mut self) {
        if let Some(s) = &mut self.session {
            s.status = Status::Paused;
            s.train_for(1, Duration::from_secs(10));
            s.refresh_picture();
        }
    }

    fn keyboard(&mut self, ui: &egui::Ui) {
        if ui.ctx().egui_wants_keyboard_input() {
            return;
        }
        let (space, s, r, help) = ui.input(|i| {
            (
                i.key_pressed(Key::Space),
                i.key_pressed(Key::S),
                i.key_pressed(Key::R),
                i.key_pressed(Key::Questionmark),
            )
        });
        if self.lab_open {
            // the lab has Play and Reset only
            if let Some(lab) = &mut self.lab {
                if space {
                    lab.toggle_play();
                }
                if r {
                    lab.reset();
                }
            }
            return;
        }
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
            self.show_help = !self.show_help;
        }
    }

    /// The switch between the 2D playground and the phi^4 lab.
    fn lab_switch_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            if ui.selectable_label(!self.lab_open, "2D flows").clicked() {
                self.lab_open = false;
            }
            if ui
                .selectable_label(self.lab_open, "phi^4 lattice")
                .on_hover_text("Flows for lattice field theory: mode collapse and its cure.")
                .clicked()
                && !self.lab_open
            {
                self.open_lab(None);
            }
        });
        ui.separator();
    }

    /// Shows the phi^4 lab, made from `settings` (or kept as it was).
    pub fn open_lab(&mut self, settings: Option<phi4_lab::LabSettings>) {
        if let Some(session) = &mut self.session
            && session.status == Status::Running
        {
            session.status = Status::Paused;
        }
        let gpu = self.found_gpu();
        match (settings, &mut self.lab) {
            (Some(s), _) => self.lab = Some(phi4_lab::Phi4Lab::new(s, gpu)),
            (None, None) => self.lab = Some(phi4_lab::Phi4Lab::new(Default::default(), gpu)),
            (None, Some(_)) => {}
        }
        self.lab_open = true;
    }

    /// The GPU found, if any (the lab has its own "train on the GPU" choice).
    fn found_gpu(&self) -> Option<GpuContext> {
        match &*self.gpu.borrow() {
            GpuStatus::Ready(ctx) => Some(ctx.clone()),
            _ => None,
        }
    }

    /// The lab's share of the app.
    pub fn lab(&self) -> Option<&phi4_lab::Phi4Lab> {
        self.lab.as_ref()
    }

    /// One frame of the phi^4 lab: train, then its panels.
    fn lab_frame(&mut self, ui: &mut egui::Ui) {
        let gpu = self.found_gpu();
        let Some(lab) = &mut self.lab else {
            self.lab_open = false;
            return;
        };
        lab.adopt_gpu(gpu);
        lab.train_for(TRAIN_BUDGET);
        if lab.running {
            ui.ctx().request_repaint();
        }
        egui::Panel::left("controls")
            .resizable(false)
            .default_size(260.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    self.lab_switch_ui(ui);
                    if let Some(m) = &self.message {
                        ui.colored_label(ui.visuals().warn_fg_color, m);
                    }
                    if let Some(lab) = &mut self.lab {
                        lab.controls_ui(ui);
                        if ui
                            .button("Copy link")
                            .on_hover_text("Copies a link that opens the lab with these settings.")
                            .clicked()
                        {
                            let query = lab.settings.to_query();
                            ui.ctx().copy_text(page_link(&query));
                            set_page_query(&query);
                        }
                    }
                });
            });
        if let Some(lab) = &mut self.lab {
            egui::Panel::bottom("loss")
                .default_size(150.0)
                .show(ui, |ui| lab.curves_ui(ui));
            egui::CentralPanel::default().show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| lab.views_ui(ui))
            });
        }
        // the tab shows the first run's progress (the browser tests read it)
        let mut title = String::from("Flow Playground | phi^4");
        if let Some(run) = self.lab.as_ref().and_then(|l| l.runs.first()) {
            title += &format!(" | step {}", run.steps());
            if let Some(e) = &run.estimates {
                title += &format!(" | ESS/N {:.3}", e.ess);
            }
            if let Some(ms) = run.ms_per_step() {
                title += &format!(" | {ms:.1} ms a step");
            }
            title += if run.on_gpu() { " | GPU" } else { " | CPU" };
        }
        if title != self.title {
            set_page_title(&title);
            self.title = title;
        }
    }

    fn controls_ui(&mut self, ui: &mut egui::Ui) {
        self.lab_switch_ui(ui);
        ui.heading("Flow Playground");
        ui.label("Train a normalizing flow live and watch it move space.");
        let mut chosen = None;
        egui::ComboBox::from_label("lesson")
            .selected_text("open a lesson...")
            .show_ui(ui, |ui| {
                for lesson in lessons() {
                    if ui.selectable_label(false, lesson.name).clicked() {
                        chosen = Some(lesson);
                    }
                }
            })
            .response
            .on_hover_text(
                "Presets that open straight into a good experiment, with what to watch.",
            );
        if let Some(lesson) = chosen {
            self.settings = lesson.settings.clone();
            self.lesson = Some((lesson.settings, lesson.what));
            self.reset();
            if let Some(session) = &mut self.session {
                session.status = Status::Running;
            }
        }
        ui.separator();
        let shown = match &self.custom_target {
            Some((name, _)) if self.settings.target == "image" => name.clone(),
            _ => self.settings.target.clone(),
        };
        let s = &mut self.settings;
        egui::ComboBox::from_label("target")
            .selected_text(shown)
            .show_ui(ui, |ui| {
                for name in target_names() {
                    ui.selectable_value(&mut s.target, name.to_string(), name);
                }
            })
            .response
            .on_hover_text(
                "The distribution to learn: samples (forward KL) or an energy (reverse KL).",
            );
        ui.horizontal(|ui| {
            if ui
                .button("Upload image")
                .on_hover_text("A PNG or JPEG as the density to learn (its rarer tone is the ink). You can also drop a file onto the page.")
                .clicked()
            {
                self.pick_file("image/png,image/jpeg");
            }
            if ui
                .button("Draw")
                .on_hover_text("Paint your own density and train on it.")
                .clicked()
            {
                self.drawing.get_or_insert_with(drawing::Drawing::default);
            }
        });
        let s = &mut self.settings;
        egui::ComboBox::from_label("flow")
            .selected_text(s.flow.name())
            .show_ui(ui, |ui| {
                for kind in FLOW_KINDS {
                    ui.selectable_value(&mut s.flow, kind, kind.name());
                }
            })
            .response
            .on_hover_text("Radial flows move mass along rays from a centre; coupling flows transform one coordinate given the other.");
        egui::ComboBox::from_label("bijection")
            .selected_text(&s.family)
            .show_ui(ui, |ui| {
                for family in FAMILIES {
                    ui.selectable_value(&mut s.family, family.to_string(), family);
                }
            })
            .response
            .on_hover_text("The scalar map: the paper's three analytic families, or the affine and spline baselines.");
        let smooth = s.target().is_ok_and(|t| t.has_smooth_density());
        ui.add_enabled(smooth, egui::Checkbox::new(&mut s.reverse_kl, "reverse KL"))
            .on_hover_text("Learn from the target's density instead of its samples (targets with both: 8gaussians, rings, circles, spiral, annulus); energies always use reverse KL. Applies at the next reset.")
            .on_disabled_hover_text("This target has only samples (forward KL) or only a density (reverse KL).");
        ui.add(egui::Slider::new(&mut s.stack, 1..=128).text("stack"))
            .on_hover_text("Scalar layers composed in each stack.");
        if s.flow == crate::flow::FlowKind::Coupling {
            ui.add(egui::Slider::new(&mut s.layers, 1..=16).text("coupling layers"))
                .on_hover_text(
                    "Coupling layers, alternating which coordinate moves given the other.",
                );
            ui.add(egui::Slider::new(&mut s.width, 8..=256).text("width"))
                .on_hover_text("Width of each layer's ResNet conditioner.");
        }
        let mut lr = s.learning_rate;
        if ui
            .add(
                egui::Slider::new(&mut lr, 1e-4..=1e-1)
                    .logarithmic(true)
                    .text("learning rate"),
            )
            .on_hover_text("Adam's step size; takes effect at once.")
            .changed()
        {
            s.learning_rate = lr;
            if let Some(session) = &mut self.session {
                session.set_learning_rate(lr);
            }
        }
        let s = &mut self.settings;
        ui.add(
            egui::Slider::new(&mut s.batch, 16..=4096)
                .logarithmic(true)
                .text("batch"),
        )
        .on_hover_text("Samples per training step; applies at the next reset.");
        ui.add(egui::Slider::new(&mut s.steps_per_frame, 1..=64).text("steps / frame"))
            .on_hover_text("Training steps per frame, as far as the frame budget allows.");
        ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "))
            .on_hover_text("The random seed of the initial model and the batches: the same seed, the same run.");
        ui.separator();
        ui.horizontal(|ui| {
            let running = self
                .session
                .as_ref()
                .is_some_and(|s| s.status == Status::Running);
            if ui
                .button(if running { "Pause" } else { "Play" })
                .on_hover_text("Start or pause training (space).")
                .clicked()
            {
                self.toggle_play();
            }
            if ui
                .button("Step")
                .on_hover_text("One training step (s).")
                .clicked()
            {
                self.single_step();
            }
            if ui
                .button("Reset")
                .on_hover_text("A new model from these settings, at step 0 (r).")
                .clicked()
            {
                self.reset();
            }
        });
        if ui
            .button("Copy link")
            .on_hover_text("Copies a link that opens this experiment with these settings.")
            .clicked()
        {
            let query = self.settings.to_query();
            ui.ctx().copy_text(page_link(&query));
            set_page_query(&query);
            self.notice = Some(if self.settings.target == "image" {
                "Link copied; an uploaded image or a drawing is not part of it.".into()
            } else {
                "Link copied.".into()
            });
        }
        ui.horizontal(|ui| {
            if ui
                .button("Export model")
                .on_hover_text("The model as JSON, in the CLI's format: flowplay eval reads it.")
                .clicked()
            {
                self.export_model();
            }
            if ui
                .button("Import model")
                .on_hover_text("Continue from an exported model or a flowplay train report (or drop the file onto the page).")
                .clicked()
            {
                self.pick_file(".json,application/json");
            }
        });
        ui.horizontal(|ui| {
            ui.label("save PNG:");
            for name in ["density", "target", "loss"] {
                if ui
                    .small_button(name)
                    .on_hover_text(format!("Saves the {name} view as a PNG image."))
                    .clicked()
                {
                    // resolved after this frame's views are drawn
                    self.save_request = Some(name);
                }
            }
        });
        ui.separator();
        let (mut look_again, mut move_here) = (false, false);
        if let Some(session) = &self.session {
            ui.label(format!("parameters: {}", session.n_params))
                .on_hover_text("Trainable numbers in the flow.");
            let fallback =
                !session.on_gpu() && matches!(&*self.gpu.borrow(), GpuStatus::Unavailable(_));
            let backend = if fallback {
                session.backend.replacen("CPU", "CPU fallback", 1)
            } else {
                session.backend.clone()
            };
            ui.label(format!("backend: {backend}")).on_hover_text(
                "Where training runs: the GPU through WebGPU (natively Vulkan), or the CPU.",
            );
            let note = if session.on_gpu() {
                None
            } else {
                self.gpu_note()
            };
            if let Some(note) = note {
                // the driver's full answer on hover; the panel keeps it short
                let short = if note.chars().count() > 90 {
                    format!("{}...", note.chars().take(90).collect::<String>())
                } else {
                    note.clone()
                };
                ui.label(RichText::new(short).small()).on_hover_text(note);
            }
            let (lost, ready) = match &*self.gpu.borrow() {
                GpuStatus::Unavailable(_) => (true, false),
                GpuStatus::Ready(_) => (false, true),
                GpuStatus::Starting => (false, false),
            };
            let movable = ready
                && self.prefer_gpu
                && !session.on_gpu()
                && !session.backend.contains("the GPU cannot");
            if lost
                && ui
                    .button("Look for a GPU again")
                    .on_hover_text("Asks the browser (or the driver) for a GPU once more.")
                    .clicked()
            {
                look_again = true;
            }
            if movable
                && session.steps_done() > 0
                && ui
                    .button("Move this run to the GPU")
                    .on_hover_text("Continues this run on the GPU from its current model (the optimizer's moments start afresh).")
                    .clicked()
            {
                move_here = true;
            }
            ui.label(format!(
                "step {} | {:.0} steps/s | {:.0} fps",
                session.steps_done(),
                session.steps_per_second,
                self.fps
            ))
            .on_hover_text("Training steps so far, training speed, and the page's frame rate.");
        }
        if look_again {
            self.find_gpu();
        }
        if move_here {
            self.move_run(self.gpu_context());
        }
        if ui
            .checkbox(&mut self.prefer_gpu, "train on the GPU")
            .on_hover_text(
                "Where there is a GPU; untick to compare with the CPU. Applies at the next reset.",
            )
            .changed()
        {
            self.reset();
        }
        ui.separator();
        ui.checkbox(&mut self.overlays.grid, "deformed grid")
            .on_hover_text("Circles and rays (radial) or a square grid (coupling) in latent space, pushed through the flow; bright where it stretches space.");
        ui.checkbox(&mut self.overlays.samples, "model samples")
            .on_hover_text("Points drawn from the model: normal samples pushed through x_from_z.");
        ui.horizontal(|ui| {
            ui.label("colour")
                .on_hover_text("The heatmap's scale: log q shows the tails, q the bulk.");
            let before = self.scale;
            ui.selectable_value(&mut self.scale, Scale::Log, "log");
            ui.selectable_value(&mut self.scale, Scale::Linear, "linear");
            if self.scale != before {
                self.texture = None;
                self.target_texture = None;
            }
        });
        if ui
            .button("Bijection explorer")
            .on_hover_text("Move a scalar map's parameters and see f, its inverse and log f'; see and edit this run's radius map.")
            .clicked()
        {
            self.explorer.get_or_insert_with(explorer::Explorer::default);
        }
        ui.horizontal(|ui| {
            ui.label("theme")
                .on_hover_text("Dark, light, or as the system is set.");
            let mut theme = ui.options(|o| o.theme_preference);
            ui.selectable_value(&mut theme, egui::ThemePreference::Dark, "dark");
            ui.selectable_value(&mut theme, egui::ThemePreference::Light, "light");
            ui.selectable_value(&mut theme, egui::ThemePreference::System, "system");
            ui.ctx().set_theme(theme);
        });
        if ui
            .button("What am I looking at?")
            .on_hover_text("The change of variables, and what each view shows (?).")
            .clicked()
        {
            self.show_help = true;
        }
    }

    fn views_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(message) = &self.message {
            ui.colored_label(ui.visuals().warn_fg_color, message);
        }
        if let Some(notice) = &self.notice {
            ui.label(notice);
        }
        // the lesson's note while its experiment is the one running
        if let (Some((settings, note)), Some(session)) = (&self.lesson, &self.session)
            && session.settings == *settings
        {
            ui.label(RichText::new(*note).italics());
        }
        let Some(session) = &mut self.session else {
            return;
        };
        if let Status::Stopped(reason) = &session.status {
            let reason = reason.clone();
            ui.horizontal(|ui| {
                ui.colored_label(ui.visuals().error_fg_color, reason);
                if let Some(step) = session.checkpoint_step()
                    && ui.button(format!("Restore step {step}")).clicked()
                {
                    if let Err(e) = session.restore_checkpoint() {
                        self.message = Some(e);
                    }
                    self.texture = None;
                }
            });
        }
        let scale = self.scale;
        if session.picture_version != self.texture_version {
            self.texture = None;
            self.texture_version = session.picture_version;
        }
        // a GPU run's first picture arrives a moment after it starts
        if self.texture.is_none() && session.picture.n > 0 {
            let values = views::normalized(&session.picture.log_q, scale);
            self.texture = Some(ui.ctx().load_texture(
                "model density",
                views::image(&values, session.picture.n),
                egui::TextureOptions::LINEAR,
            ));
        }
        let texture = self.texture.as_ref();
        let target_texture = if session.target_log_density.is_empty() {
            None
        } else {
            Some(&*self.target_texture.get_or_insert_with(|| {
                let values = views::normalized(&session.target_log_density, scale);
                ui.ctx().load_texture(
                    "target density",
                    views::image(&values, 96),
                    egui::TextureOptions::LINEAR,
                )
            }))
        };
        let available = ui.available_size();
        let side = ((available.x - 90.0) / 2.0)
            .min(available.y - 30.0)
            .max(120.0);
        ui.horizontal(|ui| {
            ui.vertical(|ui| {
                ui.label(RichText::new("model density q(x)").strong())
                    .on_hover_text("The flow's density: a normal distribution pushed through the flow, log q(x) = log N(z) + log |det dz/dx|.");
                let rect = views::model_ui(ui, texture, &session.picture, self.overlays, side);
                self.view_rects.push(("density", rect));
            });
            views::colour_bar_ui(ui, scale, side + 20.0);
            ui.vertical(|ui| {
                let name = match &self.custom_target {
                    Some((name, _)) if session.settings.target == "image" => name.as_str(),
                    _ => session.target.name(),
                };
                ui.label(RichText::new(format!("target: {name}")).strong())
                    .on_hover_text("What the flow should learn: samples, or the density of an energy target.");
                let rect = views::target_ui(ui, &session.target_samples, target_texture, side);
                self.view_rects.push(("target", rect));
            });
        });
    }

    /// The loss curve, and beside it the metrics the target allows.
    fn curves_ui(&mut self, ui: &mut egui::Ui) {
        let Some(session) = &self.session else {
            return;
        };
        let energy = session.target.kind() == crate::target::TargetKind::Energy;
        let reverse = session.loss() == crate::train::Loss::ReverseKl;
        let series = |pick: fn(&session::Metrics) -> Option<f64>| -> Series {
            session
                .metrics
                .iter()
                .filter_map(|m| pick(m).map(|v| (m.step, v)))
                .collect()
        };
        let held_out = series(|m| m.held_out_nll);
        let label = if energy {
            "reverse KL loss, KL - log Z (nats)"
        } else if reverse {
            "reverse KL, mean of log q - log p over model samples (nats)"
        } else {
            "-log q of training batches (nats); orange: held-out samples"
        };
        // (title, (step, value) points, what it means)
        let mut side: Vec<(&str, Series, &str)> = Vec::new();
        if reverse {
            side.push(("ESS/N", series(|m| m.ess), "Effective sample size of the flow's importance weights against the target, over N: 1 is perfect."));
            side.push((
                "reverse KL",
                series(|m| m.reverse_kl),
                "KL(q || p) from 500 flow samples (with log Z estimated where it is not known).",
            ));
        }
        let grid = series(|m| m.grid_kl);
        if !grid.is_empty() {
            side.push(("grid KL", grid, "KL(target || model) on the view's grid: how far the heatmap is from the target's density."));
        }
        if !held_out.is_empty() {
            side.push(("held-out NLL", held_out.clone(), "Mean -log q of 500 target samples never trained on; rising while the loss falls means overfitting."));
        }
        // up to two metrics in a column, more in two columns
        let columns = if side.len() > 2 { 2 } else { 1 };
        let side_width = match side.len() {
            0 => 0.0,
            _ => 250.0 * columns as f32,
        };
        let width = ui.available_width() - side_width - 8.0;
        ui.horizontal(|ui| {
            let response = views::loss_ui(
                ui,
                &session.losses,
                // the held-out NLL shares the forward KL's units, not the reverse's
                if reverse { &[] } else { &held_out },
                label,
                Vec2::new(width, 130.0),
            );
            self.view_rects.push(("loss", response.rect));
            response.on_hover_text(
                "The training loss at every step (thin) and its running mean (thick).",
            );
            let rows = side.len().div_ceil(columns.max(1));
            for column in side.chunks(rows.max(1)) {
                ui.vertical(|ui| {
                    let height = 130.0 / rows as f32 - 2.0;
                    for (title, points, hover) in column {
                        views::series_ui(ui, title, points, Vec2::new(244.0, height))
                            .on_hover_text(*hover);
                    }
                });
            }
        });
    }

    fn help_ui(&mut self, ctx: &egui::Context) {
        egui::Window::new("What am I looking at")
            .open(&mut self.show_help)
            .show(ctx, |ui| {
                ui.label("A normalizing flow maps simple noise z ~ N(0, I) to data x = f(z) through an invertible map; its density follows from the change of variables:");
                ui.monospace("log q(x) = log N(f^-1(x)) + log |det d f^-1 / dx|");
                ui.label("- The heatmap is q(x): bright where the model puts mass.");
                ui.label("- The grid lines are circles and rays (radial flows) or a square grid (coupling flows) in z, pushed through f: where they spread apart, the flow stretches space and density thins; bright lines mark |det J| > 1.");
                ui.label("- Orange dots are samples of the model; the red ring marks a radial flow's centre, the dashed ellipse its scales.");
                ui.label("- The loss is the mean -log q of the target's samples (forward KL) or the reverse KL to an energy.");
                ui.separator();
                ui.label("Keys: space play/pause | s one step | r reset | ? this help");
            });
    }
}

impl eframe::App for Playground {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let now = Instant::now();
        if let Some(last) = self.last_frame {
            let dt = now.duration_since(last).as_secs_f64();
            if dt > 0.0 {
                self.fps = if self.fps == 0.0 {
                    1.0 / dt
                } else {
                    0.9 * self.fps + 0.1 / dt
                };
            }
        }
        self.last_frame = Some(now);
        self.keyboard(ui);
        self.take_files(ui.ctx());
        self.finish_screenshot(ui.ctx());
        self.view_rects.clear();
        self.adopt_gpu();
        if matches!(*self.gpu.borrow(), GpuStatus::Starting) {
            // the browser answers the GPU request between frames
            ui.ctx().request_repaint_after(Duration::from_millis(100));
        }
        self.survive_a_lost_gpu();
        if self.lab_open {
            self.lab_frame(ui);
            return;
        }
        if let Some(session) = &mut self.session {
            session.poll();
            if session.status == Status::Running {
                session.train_for(session.settings.steps_per_frame, TRAIN_BUDGET);
                if now.duration_since(self.last_picture) >= session.picture_interval()
                    || session.status != Status::Running
                {
                    session.refresh_picture();
                    self.last_picture = now;
                }
                ui.ctx().request_repaint();
            } else if session.on_gpu() {
                // GPU results arrive asynchronously
                ui.ctx().request_repaint_after(Duration::from_millis(100));
            }
        }
        egui::Panel::left("controls")
            .resizable(false)
            .default_size(260.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| self.controls_ui(ui));
            });
        egui::Panel::bottom("loss")
            .default_size(150.0)
            .show(ui, |ui| self.curves_ui(ui));
        egui::CentralPanel::default().show(ui, |ui| self.views_ui(ui));
        let ctx = ui.ctx().clone();
        self.help_ui(&ctx);
        self.drawing_ui(&ctx);
        self.explorer_ui(&ctx);
        if let Some(name) = self.save_request.take() {
            self.save_view(&ctx, name);
        }
        self.update_title();
    }
}

/// Files and pictures: uploads, drawings, model import and export, PNGs.
impl Playground {
    /// Opens the browser's file picker (natively, says to drop the file).
    fn pick_file(&mut self, accept: &str) {
        if let Err(e) = files::pick(accept, &self.upload) {
            self.notice = Some(format!("To open a file here, {e}."));
        }
    }

    /// Takes in files from the picker or dropped onto the window: a model
    /// (JSON) or an image.
    fn take_files(&mut self, ctx: &egui::Context) {
        files::take_dropped(ctx, &self.upload);
        let arrived = std::mem::take(&mut *self.upload.borrow_mut());
        for file in arrived {
            match file {
                Ok(file) if file.name.to_lowercase().ends_with(".json") => self.import_model(file),
                Ok(file) => self.use_image(file),
                Err(e) => self.message = Some(e),
            }
        }
    }

    /// Starts a run on an uploaded image as the target density.
    fn use_image(&mut self, file: files::Upload) {
        match ImageDensity::from_bytes_auto(&file.bytes) {
            Ok((density, inverted)) => {
                self.custom_target = Some((file.name.clone(), Target::Image(density)));
                self.settings.target = "image".into();
                self.reset();
                let ink = if inverted { "dark" } else { "bright" };
                self.notice = Some(format!(
                    "{}: its {ink} parts are the density to learn.",
                    file.name
                ));
            }
            Err(e) => self.message = Some(format!("{} was not used: {e}", file.name)),
        }
    }

    /// Starts a paused run from an imported model, with its settings.
    fn import_model(&mut self, file: files::Upload) {
        match model_io::import(&file.bytes, &self.settings) {
            Ok(imported) => {
                self.settings = imported.settings;
                if self.settings.target == "image" && self.custom_target.is_none() {
                    self.settings.target = Settings::default().target;
                }
                self.imported = Some(imported.model);
                self.reset();
                let mut notice = format!("Imported {}; press play to train on.", file.name);
                if !imported.ignored.is_empty() {
                    notice.push_str(&format!(
                        " Its settings {} were not understood and were ignored.",
                        imported.ignored.join(", ")
                    ));
                }
                self.notice = Some(notice);
            }
            Err(e) => {
                self.message = Some(format!(
                    "{} is not a model file the page can use: {e}",
                    file.name
                ))
            }
        }
    }

    /// Saves the current model as JSON (a download in a browser).
    fn export_model(&mut self) {
        let Some(session) = &self.session else {
            return;
        };
        let Some((step, model)) = session.model() else {
            self.notice =
                Some("The model is on its way from the GPU; try again in a moment.".into());
            return;
        };
        let name = format!("flowplay-{}-step{step}.json", session.target.name());
        let bytes = model_io::export(&model, step, &session.settings);
        self.notice = Some(match files::save(&name, "application/json", &bytes) {
            Ok(done) => format!("{done} (flowplay eval reads it)."),
            Err(e) => e,
        });
    }

    /// Asks the renderer for a screenshot, to cut the view `name` from.
    fn save_view(&mut self, ctx: &egui::Context, name: &'static str) {
        let Some(&(_, rect)) = self.view_rects.iter().find(|(n, _)| *n == name) else {
            self.notice = Some(format!("There is no {name} view to save yet."));
            return;
        };
        let slot = Screenshot::default();
        let filled = std::sync::Arc::clone(&slot);
        ctx.request_screenshot(move |image| {
            if let Ok(mut slot) = filled.lock() {
                *slot = Some(image);
            }
        });
        self.screenshot = Some((name, rect, slot));
    }

    /// Saves the view once its screenshot has arrived.
    fn finish_screenshot(&mut self, ctx: &egui::Context) {
        let Some((name, rect, slot)) = &self.screenshot else {
            return;
        };
        let shot = slot.lock().ok().and_then(|mut s| s.take());
        let Some(shot) = shot else {
            ctx.request_repaint();
            return;
        };
        let step = self.session.as_ref().map_or(0, |s| s.steps_done());
        let file = format!("flowplay-{name}-step{step}.png");
        let picture = files::crop(&shot, *rect, ctx.pixels_per_point());
        self.notice = Some(
            match files::png(&picture).and_then(|bytes| files::save(&file, "image/png", &bytes)) {
                Ok(done) => format!("{done}."),
                Err(e) => e,
            },
        );
        self.screenshot = None;
    }

    /// The bijection explorer window, while open.
    fn explorer_ui(&mut self, ctx: &egui::Context) {
        let Some(explorer) = &mut self.explorer else {
            return;
        };
        let mut open = true;
        let mut edited = None;
        let paused = self
            .session
            .as_ref()
            .is_some_and(|s| s.status != Status::Running);
        if !paused {
            self.hand_model = None;
        }
        let model = self.hand_model.clone().or_else(|| {
            self.session
                .as_ref()
                .and_then(|s| s.model())
                .map(|(_, m)| m)
        });
        egui::Window::new("Bijection explorer")
            .open(&mut open)
            .default_pos([560.0, 30.0])
            .default_height(720.0)
            .vscroll(true)
            .show(ctx, |ui| {
                egui::CollapsingHeader::new("one scalar map")
                    .default_open(true)
                    .show(ui, |ui| explorer.map_ui(ui));
                egui::CollapsingHeader::new("this run's radial flow")
                    .default_open(true)
                    .show(ui, |ui| match &model {
                        Some(model) => edited = explorer::radial_ui(ui, model, paused),
                        None => {
                            ui.label("The model is on its way from the GPU.");
                        }
                    });
            });
        if !open {
            self.explorer = None;
        }
        if let (Some(model), Some(session)) = (edited, &mut self.session) {
            match session.set_model(&model) {
                Ok(()) => self.hand_model = Some(model),
                Err(e) => self.message = Some(e),
            }
        }
    }

    /// The drawing window, while open.
    fn drawing_ui(&mut self, ctx: &egui::Context) {
        let Some(drawing) = &mut self.drawing else {
            return;
        };
        match drawing.window(ctx) {
            drawing::DrawingAction::Nothing => {}
            drawing::DrawingAction::Close => self.drawing = None,
            drawing::DrawingAction::Use(density) => {
                self.custom_target = Some(("your drawing".into(), Target::Image(density)));
                self.settings.target = "image".into();
                self.reset();
                if let Some(session) = &mut self.session {
                    session.status = Status::Running;
                }
            }
        }
    }
}

impl Playground {
    /// The run's progress in the page title: visible in the tab while training
    /// in the background, and read by the end-to-end tests.
    fn update_title(&mut self) {
        let Some(session) = &self.session else {
            return;
        };
        let device = if session.on_gpu() { "GPU" } else { "CPU" };
        let title = match session.losses.len() {
            0 => format!(
                "Flow Playground | {} | {device} | step 0",
                session.target.name()
            ),
            n => {
                let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
                let k = n.min(20);
                format!(
                    "Flow Playground | {} | {device} | step {n} | loss {:.3} (first {:.3})",
                    session.target.name(),
                    mean(&session.losses[n - k..]),
                    mean(&session.losses[..k])
                )
            }
        };
        if title != self.title {
            set_page_title(&title);
            self.title = title;
        }
    }
}

/// Sets the browser tab's title (web only).
fn set_page_title(title: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(document) = web_sys::window().and_then(|w| w.document()) {
            document.set_title(title);
        }
    }
    let _ = title;
}

/// The page's URL query (web), or nothing (native).
fn page_query() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(search) = web_sys::window().and_then(|w| w.location().search().ok()) {
            return search;
        }
    }
    String::new()
}

/// A link that opens `query` (the page's address on the web).
fn page_link(query: &str) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(location) = web_sys::window().map(|w| w.location())
            && let (Ok(origin), Ok(path)) = (location.origin(), location.pathname())
        {
            return format!("{origin}{path}?{query}");
        }
    }
    format!("?{query}")
}

/// Puts `query` in the address bar without reloading (web only).
fn set_page_query(query: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = history.replace_state_with_url(
                &eframe::wasm_bindgen::JsValue::NULL,
                "",
                Some(&format!("?{query}")),
            );
        }
    }
    let _ = query;
}
