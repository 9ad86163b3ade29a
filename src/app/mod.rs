//! The app: one `eframe::App` ([`PlaygroundApp`]) that owns the page's GPU and
//! shows one of two pages, the 2D [`playground`] or the phi^4 [`lab`], each in
//! its own folder with its settings, runs, controls and views.
//!
//! Shared by both pages: [`host`] (a run's trainer on the CPU or in a GPU
//! task: the one place that handshake is written), [`devices`] (the GPU,
//! once found), [`query`] (settings from links), [`lessons`] (experiments a
//! class can follow, on either page), [`classroom`] (panels a link hides,
//! the presenter's view), [`widgets`] (colour maps and plots),
//! [`files`] (uploads and downloads) and [`web`] (the browser glue).

pub mod classroom;
pub mod devices;
pub mod files;
pub mod host;
pub mod lab;
pub mod lessons;
pub mod playground;
pub mod query;
pub mod rate;
pub mod web;
pub mod widgets;

use classroom::{Classroom, PRESENTER_ZOOM, Panel};
use devices::Devices;
use eframe::egui;
use lab::Phi4Lab;
use lab::settings::LabSettings;
use lessons::{LessonAction, OpenLesson, Start};
use playground::Playground;
use playground::settings::Settings;
use query::{Appearance, ZOOMS};
use rate::RateMeter;
use web_time::Duration;

/// The share of a frame training may take.
const TRAIN_BUDGET: Duration = Duration::from_millis(14);

/// Seconds between two changes of the tab's title (see `update_title`).
const TITLE_EVERY: f64 = 0.25;

/// The pages of the app.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Page {
    /// 2D flows on toy targets, images and drawings.
    Playground,
    /// Flows on the phi^4 lattice field (`?lab=phi4` in a link).
    Phi4Lab,
}

/// The app: the page shown, the pages themselves, and the shared GPU.
pub struct PlaygroundApp {
    page: Page,
    devices: Devices,
    playground: Playground,
    /// the lab, made when first opened (its HMC reference takes a moment)
    lab: Option<Phi4Lab>,
    /// the tab title last set (web: the tab shows the run's progress), and
    /// when, in the page's seconds
    title: String,
    title_set_at: f64,
    /// frames so far, and their rate on the wall clock
    frames: usize,
    frame_meter: RateMeter,
    /// the address last written (it follows the page: the run on screen,
    /// the theme and the text size)
    query: String,
    /// the share of a frame the playground's training may take
    train_budget: Duration,
    /// the lesson on screen, if one is open
    lesson: Option<OpenLesson>,
    /// the panels hidden, and whether the page presents
    classroom: Classroom,
    /// a link opened the presenter's view: its text size comes with the first frame
    presenter_zoom_pending: bool,
}

impl PlaygroundApp {
    /// The app as the page's address describes it (natively: the defaults),
    /// training on the GPU it renders with where that one computes.
    pub fn new(cc: &eframe::CreationContext<'_>) -> Self {
        let query = web::page_query();
        let appearance = Appearance::from_query(&query);
        if let Some(theme) = appearance.theme {
            cc.egui_ctx.set_theme(theme);
        }
        if let Some(zoom) = appearance.zoom {
            cc.egui_ctx.set_zoom_factor(zoom);
        }
        let devices = Devices::default();
        devices.use_render_device(cc.wgpu_render_state.as_ref());
        Self::from_query(&query, devices)
    }

    /// The app a link describes, on the CPU until [`Self::find_gpu`] finds a
    /// GPU (the tests' way in to links).
    pub fn from_link(query: &str) -> Self {
        Self::from_query(query, Devices::default())
    }

    /// The page a link's query describes: a lesson, the lab or the
    /// playground, with what it had that was not used named on the page.
    fn from_query(query: &str, devices: Devices) -> Self {
        // before any run starts: where CPU runs train
        let worker = query::worker_in(query);
        if let Some(Ok(wanted)) = worker {
            host::worker::set_wanted(wanted);
        }
        let workers = query::workers_in(query);
        if let Some(Ok(n)) = workers {
            host::worker::set_workers(n);
        }
        let mut app = if query.contains("lab=phi4") {
            let (settings, ignored) = LabSettings::from_query(query);
            let mut app = Self::with_devices(Settings::default(), devices);
            app.open_lab(Some(settings));
            if let Some(lab) = &mut app.lab {
                lab.message = query::ignored_note(&ignored);
            }
            app
        } else {
            let (settings, ignored) = Settings::from_query(query);
            let mut app = Self::with_devices(settings, devices);
            if let Some(note) = query::ignored_note(&ignored) {
                app.playground.warn(note);
            }
            app
        };
        if let Some(id) = query::lesson_in(query)
            && let Err(why) = app.open_lesson(id)
        {
            app.warn(format!("The link's lesson={id} was not used: {why}."));
        }
        match query::gpu_in(query) {
            Some(Ok(gpu)) => app.playground.choose_gpu(gpu),
            Some(Err(why)) => app.warn(format!("The link chose no device: {why}.")),
            None => {}
        }
        if let Some(Err(why)) = worker {
            app.warn(format!("The link's worker entry was not used: {why}."));
        }
        if let Some(Err(why)) = workers {
            app.warn(format!("The link's workers entry was not used: {why}."));
        }
        if let Some(id) = query::compare_in(query)
            && let Err(why) = app.playground.open_comparison_preset(id)
        {
            app.warn(format!("The link's compare={id} was not used: {why}."));
        }
        app.classroom = Classroom::from_query(query);
        // the presenter's text size, unless the link names its own
        app.presenter_zoom_pending =
            app.classroom.presenting && Appearance::from_query(query).zoom.is_none();
        app
    }

    /// The playground for `settings`, paused at step 0, on the CPU until
    /// [`Self::find_gpu`] finds a GPU (the tests' way in).
    pub fn with_settings(settings: Settings) -> Self {
        Self::with_devices(settings, Devices::default())
    }

    fn with_devices(settings: Settings, devices: Devices) -> Self {
        Self {
            page: Page::Playground,
            playground: Playground::new(settings, devices.clone()),
            devices,
            lab: None,
            title: String::new(),
            title_set_at: f64::NEG_INFINITY,
            frames: 0,
            frame_meter: RateMeter::new(),
            query: String::new(),
            train_budget: TRAIN_BUDGET,
            lesson: None,
            classroom: Classroom::default(),
            presenter_zoom_pending: false,
        }
    }

    /// The app whose CPU runs train with `threads` threads (the tests fix it,
    /// so what the page shows does not depend on the machine's cores).
    pub fn with_cpu_threads(mut self, threads: usize) -> Self {
        self.devices.cpu_threads = threads.max(1);
        self.playground.set_devices(self.devices.clone());
        self
    }

    /// The app with the playground's training allowed `budget` a frame, so
    /// each frame takes its full steps per frame on any machine (the tests
    /// count steps by frames).
    pub fn with_train_budget(mut self, budget: Duration) -> Self {
        self.train_budget = budget;
        self
    }

    /// Looks for a GPU (natively at once; in a browser the answer arrives
    /// later and a run that has not started moves there).
    pub fn find_gpu(&mut self) {
        self.devices.find();
    }

    /// Trains on the device eframe renders with (`cc.wgpu_render_state`)
    /// where it runs compute shaders, else on a GPU looked for as
    /// [`Self::find_gpu`] does.
    pub fn use_render_device(&mut self, render: Option<&eframe::egui_wgpu::RenderState>) {
        self.devices.use_render_device(render);
    }

    /// Trains the playground on the GPU (`true`, an emulated one included)
    /// or the CPU, as a user's choice (a link's `gpu=on`).
    pub fn choose_gpu(&mut self, gpu: bool) {
        self.playground.choose_gpu(gpu);
    }

    /// The browser tab's title as last set (on the web; natively the same
    /// text, set nowhere).
    pub fn tab_title(&self) -> &str {
        &self.title
    }

    /// The 2D playground.
    pub fn playground(&self) -> &Playground {
        &self.playground
    }

    /// The page shown.
    pub fn page(&self) -> Page {
        self.page
    }

    /// The lab, once opened.
    pub fn lab(&self) -> Option<&Phi4Lab> {
        self.lab.as_ref()
    }

    /// Shows the phi^4 lab, made from `settings` (or kept as it was).
    pub fn open_lab(&mut self, settings: Option<LabSettings>) {
        self.playground.pause();
        match (settings, &self.lab) {
            (Some(s), _) => self.lab = Some(Phi4Lab::new(s, self.devices.clone())),
            (None, None) => self.lab = Some(Phi4Lab::new(Default::default(), self.devices.clone())),
            (None, Some(_)) => {}
        }
        self.page = Page::Phi4Lab;
    }

    /// The lesson on screen, if one is open.
    pub fn lesson(&self) -> Option<&OpenLesson> {
        self.lesson.as_ref()
    }

    /// The panels hidden, and whether the page presents.
    pub fn classroom(&self) -> &Classroom {
        &self.classroom
    }

    /// Opens the lesson `id` (its link's name) at its start, on its page.
    pub fn open_lesson(&mut self, id: &str) -> Result<(), String> {
        let lesson = lessons::find(id)?;
        match &lesson.start {
            Start::Playground(settings) => {
                self.page = Page::Playground;
                self.playground.start_lesson_run(settings.clone());
            }
            Start::Explorer(family) => {
                self.page = Page::Playground;
                self.playground.open_explorer(*family);
            }
            Start::Drawing => {
                self.page = Page::Playground;
                self.playground.open_drawing();
            }
            Start::Lab(settings) => {
                self.open_lab(Some(settings.clone()));
                if let Some(lab) = &mut self.lab {
                    lab.toggle_play();
                }
            }
        }
        self.lesson = Some(OpenLesson::new(lesson));
        Ok(())
    }

    /// A message on the page shown.
    fn warn(&mut self, message: String) {
        match (self.page, &mut self.lab) {
            (Page::Phi4Lab, Some(lab)) => lab.message = Some(message),
            _ => self.playground.warn(message),
        }
    }

    /// The lessons' menu, at the top of both pages.
    fn lessons_menu_ui(&mut self, ui: &mut egui::Ui) {
        let mut chosen = None;
        ui.menu_button("Lessons", |ui| {
            for lesson in lessons::lessons() {
                if ui.button(lesson.name).clicked() {
                    chosen = Some(lesson.id);
                    ui.close();
                }
            }
        })
        .response
        .on_hover_text(
            "Experiments a class can follow: each opens ready, with what to do and watch.",
        );
        if let Some(id) = chosen
            && let Err(why) = self.open_lesson(id)
        {
            self.warn(why);
        }
    }

    /// The lesson's panel; "Start again" opens it afresh.
    fn lesson_ui(&mut self, ui: &mut egui::Ui) {
        let Some(open) = &mut self.lesson else {
            return;
        };
        match open.ui(ui) {
            Some(LessonAction::StartAgain) => {
                let id = open.lesson.id;
                if let Err(why) = self.open_lesson(id) {
                    self.warn(why);
                }
            }
            Some(LessonAction::Close) => self.lesson = None,
            None => {}
        }
    }

    /// The switch between the pages, at the top (unless a link hides it).
    fn page_switch_ui(&mut self, ui: &mut egui::Ui) {
        if !self.classroom.shows(Panel::Pages) {
            return;
        }
        egui::Panel::top("pages").show(ui, |ui| {
            // wrapped: on a phone the lessons and the text size go to a second row
            ui.horizontal_wrapped(|ui| {
                if ui
                    .selectable_label(self.page == Page::Playground, "2D flows")
                    .clicked()
                {
                    self.page = Page::Playground;
                }
                if ui
                    .selectable_label(self.page == Page::Phi4Lab, "phi^4 lattice")
                    .on_hover_text("Flows for lattice field theory: mode collapse and its cure.")
                    .clicked()
                    && self.page != Page::Phi4Lab
                {
                    self.open_lab(None);
                }
                ui.separator();
                self.lessons_menu_ui(ui);
                ui.separator();
                Self::text_size_ui(ui);
                ui.separator();
                self.present_ui(ui);
            });
        });
    }

    /// "Present": large type for a projector, the controls folded into a
    /// run bar; again, back to the normal page.
    fn present_ui(&mut self, ui: &mut egui::Ui) {
        let presenting = self.classroom.presenting;
        if ui
            .selectable_label(presenting, "Present")
            .on_hover_text(
                "Large type for a projector, the settings folded into a run bar \
                 (the link keeps it: present=on; hide=controls,curves,target,pages hides panels).",
            )
            .clicked()
        {
            self.set_presenting(ui.ctx(), !presenting);
        }
    }

    /// Starts or ends the presenter's view, with its text size.
    fn set_presenting(&mut self, ctx: &egui::Context, on: bool) {
        self.classroom.set_presenting(on);
        let zoom = ctx.zoom_factor();
        if on && zoom < PRESENTER_ZOOM {
            ctx.set_zoom_factor(PRESENTER_ZOOM);
        } else if !on && zoom >= PRESENTER_ZOOM {
            ctx.set_zoom_factor(1.0);
        }
    }

    /// Esc shows every panel and ends the presenter's view; a link's
    /// presenter's view gets its text size.
    fn classroom_keys(&mut self, ui: &egui::Ui) {
        if std::mem::take(&mut self.presenter_zoom_pending) {
            ui.ctx().set_zoom_factor(PRESENTER_ZOOM);
        }
        if self.classroom != Classroom::default() && ui.input(|i| i.key_pressed(egui::Key::Escape))
        {
            if self.classroom.presenting {
                self.set_presenting(ui.ctx(), false);
            }
            self.classroom.show_all();
        }
    }

    /// Counts a frame for the frame rate.
    fn count_frame(&mut self) {
        self.frames += 1;
        self.frame_meter.record(self.frames);
    }

    /// The page's address: the run on screen (the playground's or the lab's
    /// settings), the workers a link chose and the appearance.
    pub fn query(&self, ctx: &egui::Context) -> String {
        let page = match (self.page, &self.lab) {
            (Page::Phi4Lab, Some(lab)) => lab.query(),
            _ => self.playground.query().unwrap_or_default(),
        };
        let lesson = match &self.lesson {
            Some(open) => format!("&{}={}", query::LESSON_KEY, open.lesson.id),
            None => String::new(),
        };
        let workers = host::worker::workers_chosen()
            .map_or(String::new(), |n| format!("&{}={n}", query::WORKERS_KEY));
        format!(
            "{page}{lesson}{workers}{}{}",
            self.classroom.to_query(),
            Appearance::of(ctx).to_query()
        )
    }

    /// Keeps the address bar on what the page shows (replacing the history
    /// entry: no new one per change).
    fn update_address(&mut self, ctx: &egui::Context) {
        let query = self.query(ctx);
        if query != self.query {
            web::set_page_query(&query);
            self.query = query;
        }
    }

    /// The text size: smaller, the percentage, larger (for a projector).
    fn text_size_ui(ui: &mut egui::Ui) {
        let zoom = ui.ctx().zoom_factor();
        let mut next = zoom;
        if ui
            .small_button("A-")
            .on_hover_text("Smaller text and views.")
            .clicked()
        {
            next = zoom - 0.25;
        }
        ui.label(format!("{:.0}%", 100.0 * zoom))
            .on_hover_text("Text size: larger for a projector or a class.");
        if ui
            .small_button("A+")
            .on_hover_text("Larger text and views.")
            .clicked()
        {
            next = zoom + 0.25;
        }
        let next = next.clamp(*ZOOMS.start(), *ZOOMS.end());
        if next != zoom {
            ui.ctx().set_zoom_factor(next);
        }
    }

    /// Shows the page's progress in the browser tab, at most every
    /// [`TITLE_EVERY`] seconds: while training the step changes every frame,
    /// and each new title is a call into the browser that took about 2 ms a
    /// frame of the page's thread in headless Chromium on two busy cores. A change
    /// held back is shown once due, whether or not anything else redraws.
    fn update_title(&mut self, ctx: &egui::Context) {
        let title = match (self.page, &self.lab) {
            (Page::Phi4Lab, Some(lab)) => Some(lab.title()),
            _ => self.playground.title(),
        };
        let Some(title) = title.filter(|t| *t != self.title) else {
            return;
        };
        let (now, due) = (ctx.input(|i| i.time), self.title_set_at + TITLE_EVERY);
        if now >= due {
            web::set_page_title(&title);
            self.title = title;
            self.title_set_at = now;
        } else {
            ctx.request_repaint_after(Duration::from_secs_f64(due - now));
        }
    }
}

/// Whether `event` is the user acting (a press, a tap, a key, text), not the
/// pointer merely moving.
fn is_user_action(event: &egui::Event) -> bool {
    matches!(
        event,
        egui::Event::PointerButton { .. }
            | egui::Event::Key { .. }
            | egui::Event::Text(_)
            | egui::Event::Touch { .. }
    )
}

impl eframe::App for PlaygroundApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.count_frame();
        if self.devices.starting() {
            // the browser answers the GPU request between frames
            ui.ctx().request_repaint_after(Duration::from_millis(100));
        }
        self.classroom_keys(ui);
        self.page_switch_ui(ui);
        // before the page's own panels, so the lesson stands beside them
        self.lesson_ui(ui);
        // input first: a frame with a click, a tap or a key trains nothing, so
        // the page answers it at once however heavy training is
        let input = ui.input(|i| i.events.iter().any(is_user_action));
        let (budget, lab_budget) = if input {
            ui.ctx().request_repaint();
            (Duration::ZERO, Duration::ZERO)
        } else {
            (self.train_budget, TRAIN_BUDGET)
        };
        match (self.page, &mut self.lab) {
            (Page::Phi4Lab, Some(lab)) => lab.ui(ui, lab_budget, &mut self.classroom),
            _ => {
                let fps = self.frame_meter.per_second();
                self.playground.ui(ui, budget, fps, &mut self.classroom)
            }
        }
        self.update_title(ui.ctx());
        self.update_address(ui.ctx());
    }
}
