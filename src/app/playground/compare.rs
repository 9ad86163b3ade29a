//! Side by side: two to four designs (flow, family and size) trained together
//! on one target with one seed, batch, learning rate and step budget, shown
//! as small multiples with one table: parameters, held-out NLL (or reverse
//! KL and ESS/N for an energy), steps done, steps/s, and whether the run
//! diverged. Each design is a full playground run ([`Session`]): a run that
//! diverges stops alone while the others go on. The presets make the paper's
//! claims visible: a radial flow of a few dozen parameters against a coupling
//! flow of about 270,000 on the rings, and an analytic coupling flow against
//! the affine one at a learning rate where the affine one diverges.

use super::Playground;
use super::session::{Session, Start, Status};
use super::settings::{FAMILIES, FLOW_KINDS, Settings, TargetChoice};
use super::views::{Overlays, model_ui};
use crate::app::widgets::colour::{image, normalized};
use crate::bijection::Family;
use crate::flow::FlowKind;
use crate::target::{Target, TargetKind};
use eframe::egui::{self, RichText};
use web_time::Duration;

/// Most designs side by side.
pub const MAX_DESIGNS: usize = 4;
/// Steps each run trains for, unless changed.
const DEFAULT_BUDGET: usize = 1000;
/// The side of each small view, in points.
const SIDE: f32 = 210.0;

/// One design: the flow, its family and its size.
#[derive(Clone, Debug, PartialEq)]
pub struct Design {
    pub flow: FlowKind,
    pub family: Family,
    /// scalar maps per stack
    pub stack: usize,
    /// coupling layers and conditioner width
    pub layers: usize,
    pub width: usize,
}

impl Design {
    fn radial(flow: FlowKind, family: Family, stack: usize) -> Self {
        Self {
            flow,
            family,
            stack,
            layers: 8,
            width: 64,
        }
    }

    fn coupling(family: Family, stack: usize, layers: usize, width: usize) -> Self {
        Self {
            flow: FlowKind::Coupling,
            family,
            stack,
            layers,
            width,
        }
    }

    /// The design of a page's settings.
    pub fn of(settings: &Settings) -> Self {
        Self {
            flow: settings.flow,
            family: settings.family,
            stack: settings.stack,
            layers: settings.layers,
            width: settings.width,
        }
    }

    /// "radial cubic x8", "coupling affine 8 x 64" (with "x4" after the
    /// family for a stack of four maps a coordinate).
    pub fn label(&self) -> String {
        match self.flow {
            FlowKind::Coupling => {
                let stack = match self.stack {
                    1 => String::new(),
                    k => format!(" x{k}"),
                };
                format!(
                    "coupling {}{stack} {} x {}",
                    self.family.name(),
                    self.layers,
                    self.width
                )
            }
            flow => format!("{} {} x{}", flow.name(), self.family.name(), self.stack),
        }
    }

    /// `base` with this design's flow, family and size.
    fn settings(&self, base: &Settings) -> Settings {
        Settings {
            flow: self.flow,
            family: self.family,
            stack: self.stack,
            layers: self.layers,
            width: self.width,
            ..base.clone()
        }
    }
}

/// A ready comparison: its target, learning rate, designs and budget.
pub struct Preset {
    /// its name in a link (`compare=radial-vs-coupling`)
    pub id: &'static str,
    pub name: &'static str,
    /// what it shows, for the hover text
    pub about: &'static str,
    target: &'static str,
    learning_rate: f64,
    batch: usize,
    designs: Vec<Design>,
    budget: usize,
}

/// The comparisons offered by name.
pub fn presets() -> Vec<Preset> {
    use Family::*;
    use FlowKind::*;
    vec![
        Preset {
            id: "radial-vs-coupling",
            name: "radial vs coupling (rings)",
            about: "A direct radial flow of 36 parameters against a coupling flow of about \
                    270,000 on radial data: the table shows which fits better, and at what cost \
                    a step.",
            target: "rings",
            learning_rate: 1e-2,
            batch: 512,
            designs: vec![
                Design::radial(Radial, Cubic, 8),
                Design::coupling(Cubic, 1, 8, 128),
            ],
            budget: 1000,
        },
        Preset {
            id: "affine-vs-analytic",
            name: "affine vs analytic coupling (moons, lr 0.01)",
            about: "Coupling flows with affine (RealNVP) and with cubic rational maps at a large \
                    step: the affine one diverges and stops, the analytic one trains on.",
            target: "moons",
            learning_rate: 1e-2,
            batch: 512,
            designs: vec![
                Design::coupling(Affine, 4, 8, 64),
                Design::coupling(CubicRational, 4, 8, 64),
            ],
            budget: 600,
        },
        Preset {
            id: "families",
            name: "three families (spiral)",
            about: "The angle-dependent radial flow with each analytic family, the same number \
                    of maps.",
            target: "spiral",
            learning_rate: 1e-2,
            batch: 512,
            designs: vec![
                Design::radial(RadialFourier, CubicRational, 16),
                Design::radial(RadialFourier, Sinh, 16),
                Design::radial(RadialFourier, Cubic, 16),
            ],
            budget: 1500,
        },
    ]
}

/// The preset a link names.
pub fn preset(id: &str) -> Result<Preset, String> {
    let all = presets();
    let ids: Vec<&str> = all.iter().map(|p| p.id).collect();
    let names = ids.join(", ");
    all.into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| format!("one of {names}"))
}

/// One design's run and the texture of its density.
pub struct CompareRun {
    pub design: Design,
    pub session: Session,
    /// steps/s while it last trained (the live meter reads 0 once it stops)
    pub rate: f64,
    texture: Option<(u64, egui::TextureHandle)>,
}

/// The side-by-side window's state.
pub struct Comparison {
    /// the target, seed, batch and learning rate every design trains with
    pub base: Settings,
    /// a target the settings cannot name (an upload, a drawing)
    custom_target: Option<Target>,
    pub designs: Vec<Design>,
    /// steps each run trains for
    pub budget: usize,
    /// the runs, once started
    pub runs: Vec<CompareRun>,
    /// why the runs could not start
    pub message: Option<String>,
    /// the preset taken, while its target, designs and budget are kept
    preset: Option<&'static str>,
}

impl Comparison {
    /// A comparison on `base`'s target: its design against the same flow
    /// with another family.
    pub fn new(base: Settings, custom_target: Option<Target>) -> Self {
        let first = Design::of(&base);
        let other = Family::ALL
            .into_iter()
            .find(|f| *f != first.family && !matches!(f, Family::Spline(_)))
            .unwrap_or(Family::Cubic);
        let second = Design {
            family: other,
            ..first.clone()
        };
        Self {
            base,
            custom_target,
            designs: vec![first, second],
            budget: DEFAULT_BUDGET,
            runs: Vec::new(),
            message: None,
            preset: None,
        }
    }

    /// The preset this comparison still is, for the page's address.
    pub fn link_id(&self) -> Option<&'static str> {
        let id = self.preset?;
        let p = preset(id).ok()?;
        let same = self.base.target == TargetChoice::Preset(p.target)
            && self.base.learning_rate == p.learning_rate
            && self.base.batch == p.batch
            && self.designs == p.designs
            && self.budget == p.budget;
        same.then_some(id)
    }

    /// The tab's title while runs are on screen: each run's steps and state.
    pub fn title(&self) -> Option<String> {
        if self.runs.is_empty() {
            return None;
        }
        let steps: Vec<String> = self
            .runs
            .iter()
            .map(|r| r.session.steps_done().to_string())
            .collect();
        let states: Vec<String> = self.runs.iter().map(|r| self.state(r)).collect();
        Some(format!(
            "Flow Playground | side by side on {} | steps {} of {} | {}",
            self.base.target.label(),
            steps.join("/"),
            self.budget,
            states.join(", ")
        ))
    }

    /// Takes a preset's target, learning rate, designs and budget (and
    /// forgets any runs).
    pub fn apply(&mut self, preset: &Preset) {
        self.base.target = TargetChoice::Preset(preset.target);
        self.base.learning_rate = preset.learning_rate;
        self.base.batch = preset.batch;
        self.custom_target = None;
        self.designs = preset.designs.clone();
        self.budget = preset.budget;
        self.runs.clear();
        self.message = None;
        self.preset = Some(preset.id);
    }

    /// Builds one run per design, paused at step 0; a design that cannot be
    /// built is named and the rest are not started.
    pub fn start(&mut self, offer: impl Fn() -> crate::app::host::GpuOffer, threads: usize) {
        self.runs.clear();
        self.message = None;
        let mut runs = Vec::with_capacity(self.designs.len());
        for design in &self.designs {
            let start = Start {
                target: self.custom_target.clone(),
                model: None,
            };
            match Session::new(design.settings(&self.base), start, offer(), threads) {
                Ok(session) => runs.push(CompareRun {
                    design: design.clone(),
                    session,
                    rate: 0.0,
                    texture: None,
                }),
                Err(e) => {
                    self.message = Some(format!("{}: {e}", design.label()));
                    return;
                }
            }
        }
        self.runs = runs;
    }

    /// Whether any run is training.
    pub fn running(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.session.status == Status::Running)
    }

    /// Plays every run that has steps left and has not stopped, or pauses them all.
    pub fn toggle_play(&mut self) {
        let play = !self.running();
        let budget = self.budget;
        for run in &mut self.runs {
            let s = &mut run.session;
            s.status = match (&s.status, play) {
                (Status::Stopped(_), _) => continue,
                (_, true) if s.steps_done() < budget => Status::Running,
                _ => Status::Paused,
            };
        }
    }

    /// One frame: each playing run trains for its share of `budget` (up to
    /// its steps left) and pauses when its budget is spent.
    pub fn frame(&mut self, budget: Duration, steps_per_frame: usize) {
        let playing = self
            .runs
            .iter()
            .filter(|r| r.session.status == Status::Running)
            .count()
            .max(1);
        for run in &mut self.runs {
            let s = &mut run.session;
            let left = self.budget.saturating_sub(s.steps_done());
            if s.status == Status::Running && left == 0 {
                s.status = Status::Paused;
            }
            s.settings.steps_per_frame = steps_per_frame.min(left).max(1);
            s.last_step = Some(self.budget);
            s.frame(budget / playing as u32);
            if s.status == Status::Running && s.steps_per_second() > 0.0 {
                run.rate = s.steps_per_second();
            }
        }
    }

    /// What the run's state is, in a word ([`Self::reason`] says why a
    /// run stopped).
    pub fn state(&self, run: &CompareRun) -> String {
        match &run.session.status {
            Status::Stopped(_) => format!("diverged at step {}", run.session.steps_done()),
            _ if run.session.steps_done() >= self.budget => "done".into(),
            Status::Running => "training".into(),
            Status::Paused => "paused".into(),
        }
    }
}

/// Why `run` stopped, if it did.
pub fn reason(run: &CompareRun) -> Option<&str> {
    match &run.session.status {
        Status::Stopped(why) => Some(why),
        _ => None,
    }
}

/// A table's number: three decimals, or three digits and an exponent once
/// it is large (a diverged run's NLL).
fn number(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v.abs() >= 1e5 => format!("{v:.2e}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The table's row for one run: design, parameters, the quality measures
/// the target allows, steps, steps/s, state.
pub fn table_row(comparison: &Comparison, run: &CompareRun) -> Vec<String> {
    let s = &run.session;
    let latest = s.metrics.last();
    let mut row = vec![run.design.label(), s.n_params.to_string()];
    if s.target.kind() == TargetKind::Energy {
        row.push(number(latest.and_then(|m| m.reverse_kl)));
        row.push(number(latest.and_then(|m| m.ess)));
    } else {
        row.push(number(latest.and_then(|m| m.held_out_nll)));
    }
    row.push(s.steps_done().to_string());
    row.push(format!("{:.1}", run.rate));
    row.push(comparison.state(run));
    row
}

/// The table's header for a target of `kind`.
fn table_header(kind: TargetKind) -> Vec<&'static str> {
    let mut header = vec!["design", "parameters"];
    if kind == TargetKind::Energy {
        header.extend(["reverse KL", "ESS/N"]);
    } else {
        header.push("held-out NLL");
    }
    header.extend(["steps", "steps/s", "state"]);
    header
}

impl Playground {
    /// Opens the side-by-side window on the page's target and design.
    pub fn open_comparison(&mut self) {
        if self.windows.comparison.is_none() {
            let custom = match self.settings.target {
                TargetChoice::Preset(_) => None,
                _ => self.custom_target.clone(),
            };
            self.windows.comparison = Some(Comparison::new(self.settings.clone(), custom));
        }
    }

    /// Opens the side-by-side window on the preset `id` (a link's
    /// `compare=`), its runs started and playing.
    pub fn open_comparison_preset(&mut self, id: &str) -> Result<(), String> {
        let preset = preset(id)?;
        self.open_comparison();
        let offer = self.offer();
        if let Some(comparison) = &mut self.windows.comparison {
            comparison.apply(&preset);
            comparison.start(|| offer.clone(), self.devices.cpu_threads);
            comparison.toggle_play();
        }
        Ok(())
    }

    /// The side-by-side comparison, while its window is open.
    pub fn comparison(&self) -> Option<&Comparison> {
        self.windows.comparison.as_ref()
    }

    /// Trains the comparison's runs this frame (the page's own run waits
    /// while they play).
    pub(super) fn compare_frame(&mut self, ctx: &egui::Context, budget: Duration) {
        let Some(comparison) = &mut self.windows.comparison else {
            return;
        };
        if comparison.running() {
            if let Some(session) = &mut self.session
                && session.status == Status::Running
            {
                session.status = Status::Paused;
            }
            ctx.request_repaint();
        }
        comparison.frame(budget, self.settings.steps_per_frame);
        // a run's worker answers between frames (its pictures, a pause's)
        let waiting = comparison
            .runs
            .iter()
            .any(|r| r.session.awaiting_worker() || r.session.wants_frame());
        if waiting {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
    }

    /// The side-by-side window: presets, the designs, the buttons, the small
    /// multiples and the table.
    pub(super) fn comparison_ui(&mut self, ctx: &egui::Context, area: egui::Rect) {
        let offer = self.offer();
        let Some(comparison) = &mut self.windows.comparison else {
            return;
        };
        let (threads, overlays) = (self.devices.cpu_threads, self.views.overlays);
        let scale = self.views.scale;
        let mut open = true;
        egui::Window::new("Side by side")
            .constrain_to(area)
            .open(&mut open)
            .default_pos(area.left_top() + egui::vec2(20.0, 20.0))
            .default_width(920.0)
            .default_height((area.height() - 60.0).max(300.0))
            .vscroll(true)
            .show(ctx, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label("presets:");
                    for preset in presets() {
                        if ui.button(preset.name).on_hover_text(preset.about).clicked() {
                            comparison.apply(&preset);
                        }
                    }
                });
                designs_ui(ui, comparison);
                ui.horizontal(|ui| {
                    let started = !comparison.runs.is_empty();
                    let label = if started { "Start again" } else { "Start" };
                    if ui
                        .button(label)
                        .on_hover_text("Builds every design afresh at step 0 and plays them.")
                        .clicked()
                    {
                        comparison.start(|| offer.clone(), threads);
                        comparison.toggle_play();
                    }
                    if started {
                        let play = if comparison.running() {
                            "Pause all"
                        } else {
                            "Play all"
                        };
                        if ui.button(play).clicked() {
                            comparison.toggle_play();
                        }
                    }
                });
                if let Some(message) = &comparison.message {
                    ui.colored_label(ui.visuals().error_fg_color, message);
                }
                if comparison.runs.is_empty() {
                    return;
                }
                ui.separator();
                small_multiples_ui(ui, comparison, overlays, scale);
                ui.separator();
                table_ui(ui, comparison);
            });
        if !open {
            self.windows.comparison = None;
        }
    }
}

/// The common settings, the budget, and one row per design.
fn designs_ui(ui: &mut egui::Ui, comparison: &mut Comparison) {
    let base = &comparison.base;
    ui.label(format!(
        "On {}, seed {}, batch {}, learning rate {}, for every design:",
        base.target.label(),
        base.seed,
        base.batch,
        base.learning_rate
    ));
    ui.horizontal(|ui| {
        let label = ui.label("steps each");
        ui.add(
            egui::DragValue::new(&mut comparison.budget)
                .range(10..=100_000)
                .speed(10),
        )
        .labelled_by(label.id);
    });
    let mut remove = None;
    let can_remove = comparison.designs.len() > 2;
    for (k, design) in comparison.designs.iter_mut().enumerate() {
        ui.horizontal(|ui| {
            ui.label(format!("{}.", k + 1));
            egui::ComboBox::from_id_salt(("compare flow", k))
                .selected_text(design.flow.name())
                .show_ui(ui, |ui| {
                    for flow in FLOW_KINDS {
                        ui.selectable_value(&mut design.flow, flow, flow.name());
                    }
                });
            egui::ComboBox::from_id_salt(("compare family", k))
                .selected_text(design.family.name())
                .show_ui(ui, |ui| {
                    for family in FAMILIES {
                        ui.selectable_value(&mut design.family, family, family.name());
                    }
                });
            if design.flow == FlowKind::Coupling {
                ui.add(egui::Slider::new(&mut design.layers, 1..=16).text("layers"));
                ui.add(
                    egui::Slider::new(&mut design.width, 8..=256)
                        .logarithmic(true)
                        .text("width"),
                );
            } else {
                ui.add(egui::Slider::new(&mut design.stack, 1..=128).text("maps"));
            }
            if can_remove && ui.small_button("remove").clicked() {
                remove = Some(k);
            }
        });
    }
    if let Some(k) = remove {
        comparison.designs.remove(k);
    }
    if comparison.designs.len() < MAX_DESIGNS && ui.button("+ a design").clicked() {
        let last = comparison.designs.last().cloned();
        comparison
            .designs
            .extend(last.or_else(|| Some(Design::of(&comparison.base))));
    }
}

/// Each run's density, grid and samples, labelled with its design.
fn small_multiples_ui(
    ui: &mut egui::Ui,
    comparison: &mut Comparison,
    overlays: Overlays,
    scale: crate::app::widgets::colour::Scale,
) {
    ui.horizontal_wrapped(|ui| {
        for run in &mut comparison.runs {
            let s = &run.session;
            if run
                .texture
                .as_ref()
                .is_none_or(|(v, _)| *v != s.picture_version)
                && s.picture.n > 0
            {
                let values = normalized(&s.picture.log_q, scale);
                let texture = ui.ctx().load_texture(
                    format!("compare {}", run.design.label()),
                    image(&values, s.picture.n),
                    egui::TextureOptions::LINEAR,
                );
                run.texture = Some((s.picture_version, texture));
            }
            ui.vertical(|ui| {
                ui.label(RichText::new(run.design.label()).strong());
                let texture = run.texture.as_ref().map(|(_, t)| t);
                model_ui(
                    ui,
                    texture.map(|t| t.id()),
                    &run.session.picture,
                    overlays,
                    SIDE,
                    |_| None,
                );
            });
        }
    });
}

/// One table of every run's numbers.
fn table_ui(ui: &mut egui::Ui, comparison: &Comparison) {
    let kind = comparison
        .runs
        .first()
        .map_or(TargetKind::Samples, |r| r.session.target.kind());
    egui::Grid::new("compare table")
        .striped(true)
        .spacing([16.0, 4.0])
        .show(ui, |ui| {
            for title in table_header(kind) {
                ui.label(RichText::new(title).strong());
            }
            ui.end_row();
            for run in &comparison.runs {
                let row = table_row(comparison, run);
                for (k, cell) in row.iter().enumerate() {
                    match reason(run) {
                        Some(why) if k + 1 == row.len() => {
                            ui.colored_label(ui.visuals().error_fg_color, cell)
                                .on_hover_text(why);
                        }
                        _ => {
                            ui.label(cell);
                        }
                    }
                }
                ui.end_row();
            }
        });
}
