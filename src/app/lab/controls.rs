//! The lab's left panel: the couplings, the flow design, the run's buttons,
//! diverged runs' way back, and where the runs train.

use super::Phi4Lab;
use super::settings::{
    BATCHES, CHANNELS, FAMILIES, FLOWS, KERNELS, LAMBDAS, LAYERS, LEARNING_RATES, MASSES, SIZES,
    flow_name,
};
use crate::app::query::Appearance;
use crate::app::web::page_link;
use crate::app::widgets::notes::dismissable_warning_ui;
use crate::flow::{Activation, FlowKind};
use eframe::egui;

impl Phi4Lab {
    /// The left panel, top to bottom.
    pub(super) fn controls_ui(&mut self, ui: &mut egui::Ui) {
        ui.heading("phi^4 lattice lab");
        ui.label(
            "Flows learn the phi^4 lattice field theory from its action alone \
             (reverse KL), checked against Hamiltonian Monte Carlo.",
        );
        dismissable_warning_ui(ui, &mut self.message);
        if let Some(n) = &self.notice {
            ui.label(n);
        }
        ui.separator();
        self.couplings_ui(ui);
        ui.separator();
        self.design_ui(ui);
        ui.separator();
        self.buttons_ui(ui);
        self.stopped_runs_ui(ui);
        ui.separator();
        self.device_ui(ui);
    }

    fn couplings_ui(&mut self, ui: &mut egui::Ui) {
        let s = &mut self.settings;
        ui.add(
            egui::Slider::new(&mut s.size, SIZES)
                .step_by(2.0)
                .text("lattice L"),
        )
        .on_hover_text("The lattice is L x L with periodic boundaries.");
        ui.add(
            egui::Slider::new(&mut s.m2, MASSES)
                .step_by(0.25)
                .text("m^2"),
        )
        .on_hover_text(
            "Mass term. With lambda it sets the phase: at m^2 = -4 the field is disordered for \
             large lambda and orders into two modes (M > 0 or M < 0) for small lambda.",
        );
        ui.add(
            egui::Slider::new(&mut s.lambda, LAMBDAS)
                .step_by(0.25)
                .text("lambda"),
        )
        .on_hover_text(
            "Quartic coupling. At m^2 = -4, lambda = 8 is symmetric (<M> = 0, one broad mode); \
                 lambda = 2 is broken (two modes, M > 0 and M < 0).",
        );
        ui.horizontal(|ui| {
            if ui
                .button("symmetric point")
                .on_hover_text("m^2 = -4, lambda = 8: the runs start again there.")
                .clicked()
            {
                s.m2 = -4.0;
                s.lambda = 8.0;
            }
            if ui
                .button("broken point")
                .on_hover_text("m^2 = -4, lambda = 2: the runs start again there.")
                .clicked()
            {
                s.m2 = -4.0;
                s.lambda = 2.0;
            }
        });
    }

    fn design_ui(&mut self, ui: &mut egui::Ui) {
        let s = &mut self.settings;
        egui::ComboBox::from_label("flow")
            .selected_text(flow_name(s.flow))
            .show_ui(ui, |ui| {
                for (kind, what) in FLOWS.into_iter().zip(["checkerboard, conv", "whole field"]) {
                    ui.selectable_value(&mut s.flow, kind, format!("{} ({what})", flow_name(kind)));
                }
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
                egui::Slider::new(&mut s.learning_rate, LEARNING_RATES)
                    .logarithmic(true)
                    .text("learning rate"),
            )
            .on_hover_text("Adam's step size, applied at once.")
            .changed();
        ui.add(egui::Slider::new(&mut s.batch, BATCHES).text("batch"))
            .on_hover_text("Flow samples a training step; the runs start again at once.");
        if s.flow == FlowKind::Lattice {
            architecture_ui(ui, s);
        }
        if lr_changed {
            let lr = s.learning_rate;
            for run in &mut self.runs {
                run.host.set_learning_rate(lr);
            }
        }
    }

    /// Play or pause, and reset (also the run bar's, when the controls are hidden).
    pub(super) fn run_buttons_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            let play = if self.running { "Pause" } else { "Play" };
            if ui.button(play).on_hover_text("space").clicked() {
                self.toggle_play();
            }
            if ui.button("Reset").clicked() {
                self.reset();
            }
        });
    }

    fn buttons_ui(&mut self, ui: &mut egui::Ui) {
        self.run_buttons_ui(ui);
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
        if ui
            .button("Layer by layer")
            .on_hover_text(
                "A run's flow cut after its first k layers: fields and the magnetization \
                 histogram from the latent normal to the model, and a morph between them.",
            )
            .clicked()
        {
            self.open_layers();
        }
        if ui
            .button("Copy link")
            .on_hover_text("Copies a link that opens the lab with these settings.")
            .clicked()
        {
            let query = self.query() + &Appearance::of(ui.ctx()).to_query();
            ui.ctx().copy_text(page_link(&query));
            self.notice = Some("Link copied.".into());
        }
        if ui
            .button("Save PNG of the views")
            .on_hover_text("The fields, the histogram and the curves as one picture.")
            .clicked()
        {
            self.save_asked = true;
        }
        let mut export = None;
        for (k, run) in self.runs.iter().enumerate() {
            let text = if self.runs.len() == 1 {
                "Export as Python (bijx)".to_string()
            } else {
                format!("Export {} as Python (bijx)", run.label)
            };
            if ui
                .button(text)
                .on_hover_text(
                    "A Python script that rebuilds this flow, with its trained parameters, in \
                     bijx (the paper's JAX library) and checks that it gives the same densities.",
                )
                .clicked()
            {
                export = Some(k);
            }
        }
        if let Some(k) = export {
            self.export_bijx_script(k);
        }
    }

    /// Each stopped run's reason, and the way to go on from its last good state.
    fn stopped_runs_ui(&mut self, ui: &mut egui::Ui) {
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
    }

    fn device_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(gpu) = self.devices.context().filter(|g| g.lost().is_none()) {
            ui.checkbox(&mut self.prefer_gpu, "train on the GPU")
                .on_hover_text("Applied by Reset and Compare.");
            if gpu.software {
                ui.label(
                    "This GPU is emulated in software: the CPU trains the lattice flows faster.",
                );
            }
        }
        let mut devices: Vec<&str> = self.runs.iter().map(|r| r.host.device.as_str()).collect();
        devices.dedup();
        for device in devices {
            ui.label(format!("Training on: {device}"));
        }
    }
}

/// The coupling flow's architecture: layers, the conditioner's channels,
/// kernel, activation and joins, and a composite site map.
fn architecture_ui(ui: &mut egui::Ui, s: &mut super::settings::LabSettings) {
    egui::CollapsingHeader::new("architecture")
        .id_salt("lab architecture")
        .show(ui, |ui| {
            ui.add(egui::Slider::new(&mut s.layers, LAYERS).text("layers"))
                .on_hover_text("Checkerboard coupling layers; two update every site once.");
            ui.add(egui::Slider::new(&mut s.channels, CHANNELS).text("channels"))
                .on_hover_text("Channels of each hidden layer of the convolutional conditioner.");
            egui::ComboBox::from_label("kernel")
                .selected_text(format!("{0} x {0}", s.kernel))
                .show_ui(ui, |ui| {
                    for k in KERNELS {
                        ui.selectable_value(&mut s.kernel, k, format!("{k} x {k}"));
                    }
                });
            egui::ComboBox::from_label("activation")
                .selected_text(s.activation.name())
                .show_ui(ui, |ui| {
                    for a in Activation::ALL {
                        ui.selectable_value(&mut s.activation, a, a.name());
                    }
                });
            ui.checkbox(&mut s.plain, "plain conditioner (1 -> c -> c -> out)")
                .on_hover_text(
                    "Two hidden convolutions one after the other, as the phi^4 tutorials build \
                     it, instead of a residual block. The GPU trains the residual GELU \
                     conditioner with a 3 x 3 kernel; other designs train on the CPU.",
                );
            ui.checkbox(&mut s.affine_first, "affine map first")
                .on_hover_text(
                    "Each site's map is an affine map followed by the family: the affine part \
                     moves and scales, the analytic map shapes.",
                );
        });
}
