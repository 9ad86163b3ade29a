//! The playground's left panel: the target, the flow and how it
//! trains, the run's buttons, sharing and files, the device, and the display.

use super::session::Status;
use super::settings::{
    BATCHES, FAMILIES, FLOW_KINDS, LAYERS, LEARNING_RATES, STACKS, STEPS_PER_FRAME, TargetChoice,
    WIDTHS, target_names,
};
use super::views::Scale;
use super::{Playground, drawing, explorer};
use crate::app::host::CpuReason;
use crate::app::query::Appearance;
use crate::app::web::page_link;
use crate::flow::FlowKind;
use eframe::egui::{self, RichText};

impl Playground {
    /// The left panel, top to bottom.
    pub(super) fn controls_ui(&mut self, ui: &mut egui::Ui) {
        ui.heading("Flow Playground");
        ui.label("Train a normalizing flow live and watch it move space.");
        ui.separator();
        self.target_ui(ui);
        self.flow_ui(ui);
        self.training_ui(ui);
        ui.separator();
        // a narrow screen has them above the drawer
        if !self.narrow {
            self.run_buttons_ui(ui);
        }
        self.share_ui(ui);
        ui.separator();
        self.device_ui(ui);
        ui.separator();
        self.display_ui(ui);
    }

    fn target_ui(&mut self, ui: &mut egui::Ui) {
        let s = &mut self.settings;
        egui::ComboBox::from_label("target")
            .selected_text(s.target.label().to_string())
            .show_ui(ui, |ui| {
                for name in target_names() {
                    ui.selectable_value(&mut s.target, TargetChoice::Preset(name), name);
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
                self.windows
                    .drawing
                    .get_or_insert_with(drawing::Drawing::default);
            }
        });
    }

    fn flow_ui(&mut self, ui: &mut egui::Ui) {
        let s = &mut self.settings;
        let flow_before = s.flow;
        egui::ComboBox::from_label("flow")
            .selected_text(s.flow.name())
            .show_ui(ui, |ui| {
                for kind in FLOW_KINDS {
                    ui.selectable_value(&mut s.flow, kind, kind.name());
                }
            })
            .response
            .on_hover_text("Radial flows move mass along rays from a centre; coupling flows transform one coordinate given the other.");
        if s.flow != flow_before
            && let Some(note) = s.suit_flow()
        {
            self.notice = Some(note);
        }
        let s = &mut self.settings;
        egui::ComboBox::from_label("bijection")
            .selected_text(s.family.name())
            .show_ui(ui, |ui| {
                for family in FAMILIES {
                    ui.selectable_value(&mut s.family, family, family.name());
                }
            })
            .response
            .on_hover_text("The scalar map: the paper's three analytic families, or the affine and spline baselines.");
        let smooth = match &s.target {
            TargetChoice::Preset(_) => s.preset_target().is_ok_and(|t| t.has_smooth_density()),
            _ => false,
        };
        ui.add_enabled(smooth, egui::Checkbox::new(&mut s.reverse_kl, "reverse KL"))
            .on_hover_text("Learn from the target's density instead of its samples (targets with both: 8gaussians, rings, circles, spiral, annulus); energies always use reverse KL. A new run starts at once.")
            .on_disabled_hover_text("This target has only samples (forward KL) or only a density (reverse KL).");
        ui.add(egui::Slider::new(&mut s.stack, STACKS).text("stack"))
            .on_hover_text("Scalar layers composed in each stack.");
        if s.flow == FlowKind::Coupling {
            ui.add(egui::Slider::new(&mut s.layers, LAYERS).text("coupling layers"))
                .on_hover_text(
                    "Coupling layers, alternating which coordinate moves given the other.",
                );
            ui.add(egui::Slider::new(&mut s.width, WIDTHS).text("width"))
                .on_hover_text("Width of each layer's ResNet conditioner.");
        }
    }

    fn training_ui(&mut self, ui: &mut egui::Ui) {
        let mut lr = self.settings.learning_rate;
        if ui
            .add(
                egui::Slider::new(&mut lr, LEARNING_RATES)
                    .logarithmic(true)
                    .text("learning rate"),
            )
            .on_hover_text("Adam's step size; takes effect at once.")
            .changed()
        {
            self.settings.learning_rate = lr;
            if let Some(session) = &mut self.session {
                session.set_learning_rate(lr);
            }
        }
        let s = &mut self.settings;
        ui.add(
            egui::Slider::new(&mut s.batch, BATCHES)
                .logarithmic(true)
                .text("batch"),
        )
        .on_hover_text("Samples per training step; a new run starts at once.");
        ui.add(egui::Slider::new(&mut s.steps_per_frame, STEPS_PER_FRAME).text("steps / frame"))
            .on_hover_text("Training steps per frame, as far as the frame budget allows. In a Web Worker this sets the pace instead: this many steps per 1/60 s, whatever the frame rate, as far as the worker keeps up.");
        ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "))
            .on_hover_text("The random seed of the initial model and the batches: the same seed, the same run.");
    }

    pub(super) fn run_buttons_ui(&mut self, ui: &mut egui::Ui) {
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
                .on_hover_text("A new model from these settings, at step 0 (r). Changing a setting starts one by itself.")
                .clicked()
            {
                self.reset();
            }
        });
    }

    fn share_ui(&mut self, ui: &mut egui::Ui) {
        if ui
            .button("Copy link")
            .on_hover_text("Copies a link that opens the run on screen (its settings, the theme and the text size). The address bar always holds it too.")
            .clicked()
        {
            let query = self.query().unwrap_or_default() + &Appearance::of(ui.ctx()).to_query();
            ui.ctx().copy_text(page_link(&query));
            self.notice = Some(match self.settings.target {
                TargetChoice::Preset(_) => "Link copied.".into(),
                _ => "Link copied; an uploaded image or a drawing is not part of it.".into(),
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
        if ui
            .button("Export as Python (bijx)")
            .on_hover_text("A Python script that rebuilds this flow, with its trained parameters, in bijx (the paper's JAX library) and checks that it gives the same densities: the way to a bigger model on your own machine.")
            .clicked()
        {
            self.export_bijx_script();
        }
        ui.horizontal(|ui| {
            ui.label("save PNG:");
            for name in ["density", "target", "loss"] {
                if ui
                    .small_button(name)
                    .on_hover_text(format!("Saves the {name} view as a PNG image."))
                    .clicked()
                {
                    self.views.request_save(name);
                }
            }
        });
    }

    /// The run's size and device, and the GPU choices.
    fn device_ui(&mut self, ui: &mut egui::Ui) {
        let (mut look_again, mut move_here) = (false, false);
        if let Some(session) = &self.session {
            ui.label(format!("parameters: {}", session.n_params))
                .on_hover_text("Trainable numbers in the flow.");
            let fallback = !session.on_gpu() && self.devices.unavailable();
            let device = if fallback {
                session.device().replacen("CPU", "CPU fallback", 1)
            } else {
                session.device().to_string()
            };
            let reason = session.cpu_reason().and_then(|r| r.note());
            let backend = match reason {
                Some(why) => format!("backend: {device} ({why})"),
                None => format!("backend: {device}"),
            };
            ui.label(backend).on_hover_text(
                "Where training runs: the GPU through WebGPU (natively Vulkan), or the CPU.",
            );
            if let Some(note) = self.devices.note().filter(|_| !session.on_gpu()) {
                short_note_ui(ui, note);
            }
            let movable = self.devices.context().is_some()
                && self.prefers_gpu()
                && !session.on_gpu()
                && !matches!(session.cpu_reason(), Some(CpuReason::Unsupported(_)));
            look_again = self.devices.unavailable()
                && ui
                    .button("Look for a GPU again")
                    .on_hover_text("Asks the browser (or the driver) for a GPU once more.")
                    .clicked();
            move_here = movable
                && session.steps_done() > 0
                && ui
                    .button("Move this run to the GPU")
                    .on_hover_text("Continues this run on the GPU from its current model (the optimizer's moments start afresh).")
                    .clicked();
            // the frame rate means something while training; paused, the page
            // redraws only when something changes
            let fps = match session.status {
                Status::Running => format!(" | {:.0} fps", self.frames_per_second),
                _ => String::new(),
            };
            ui.label(format!(
                "step {} | {:.0} steps/s{fps}",
                session.steps_done(),
                session.steps_per_second(),
            ))
            .on_hover_text("Training steps so far, and while training, steps and frames per second of wall-clock time.");
        }
        if look_again {
            self.devices.find();
            self.notice = Some(match self.devices.context() {
                Some(gpu) => format!("Found a GPU: {}.", gpu.adapter_name),
                None if self.devices.starting() => "Asking for a GPU...".into(),
                None => "Still no GPU: the CPU trains.".into(),
            });
        }
        if move_here {
            self.move_run(true);
        }
        let mut gpu = self.prefers_gpu();
        if ui
            .checkbox(&mut gpu, "train on the GPU")
            .on_hover_text(
                "Where there is a GPU; untick to compare with the CPU. A new run starts at once.",
            )
            .changed()
        {
            self.choose_gpu(gpu);
        }
        if let Some(g) = self.devices.context().filter(|g| g.software && !gpu) {
            ui.label(format!(
                "The GPU here ({}) is emulated in software: the CPU trains faster here.",
                g.adapter_name
            ));
        }
    }

    /// What the views show, the explorer, the theme and the help.
    fn display_ui(&mut self, ui: &mut egui::Ui) {
        let overlays = &mut self.views.overlays;
        ui.checkbox(&mut overlays.grid, "deformed grid")
            .on_hover_text("Circles and rays (radial) or a square grid (coupling) in latent space, pushed through the flow; bright where it stretches space.");
        ui.checkbox(&mut overlays.samples, "model samples")
            .on_hover_text("Points drawn from the model: normal samples pushed through x_from_z.");
        ui.horizontal(|ui| {
            ui.label("colour")
                .on_hover_text("The heatmap's scale: log q shows the tails, q the bulk.");
            let mut scale = self.views.scale;
            ui.selectable_value(&mut scale, Scale::Log, "log");
            ui.selectable_value(&mut scale, Scale::Linear, "linear");
            self.views.set_scale(scale);
        });
        if ui
            .button("Bijection explorer")
            .on_hover_text("Move a scalar map's parameters and see f, its inverse and log f'; see and edit this run's radius map.")
            .clicked()
        {
            self.windows
                .explorer
                .get_or_insert_with(explorer::Explorer::default);
        }
        if ui
            .button("Side by side")
            .on_hover_text("Two to four designs trained together on this target for the same steps, with one table: parameters, quality, speed, divergence.")
            .clicked()
        {
            self.open_comparison();
        }
        if ui
            .button("Layer by layer")
            .on_hover_text("The flow cut after its first k maps, from the latent normal to the model, and a morph between them.")
            .clicked()
        {
            self.open_layers();
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
            self.windows.help = true;
        }
    }
}

/// A note kept to one short line, with the whole of it on hover.
fn short_note_ui(ui: &mut egui::Ui, note: String) {
    let short = if note.chars().count() > 90 {
        format!("{}...", note.chars().take(90).collect::<String>())
    } else {
        note.clone()
    };
    ui.label(RichText::new(short).small()).on_hover_text(note);
}
