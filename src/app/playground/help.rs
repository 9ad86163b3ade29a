//! "What am I looking at?": the change of variables, and what each view shows.

use super::Playground;
use eframe::egui;

impl Playground {
    /// The help window, while open.
    pub(super) fn help_ui(&mut self, ctx: &egui::Context, area: egui::Rect) {
        egui::Window::new("What am I looking at")
            .constrain_to(area)
            .open(&mut self.windows.help)
            .default_pos(self.views.window_pos("target"))
            .default_width(420.0)
            .vscroll(true)
            .show(ctx, |ui| {
                ui.label("A normalizing flow maps simple noise z ~ N(0, I) to data x = f(z) through an invertible map; its density follows from the change of variables:");
                ui.monospace("log q(x) = log N(f^-1(x)) + log |det d f^-1 / dx|");
                ui.label("- The heatmap is q(x): bright where the model puts mass.");
                ui.label("- The grid lines are circles and rays (radial flows) or a square grid (coupling flows) in z, pushed through f: where they spread apart, the flow stretches space and density thins; bright lines mark |det J| > 1.");
                ui.label("- Orange dots are samples of the model; the red ring marks a radial flow's centre, the dashed ellipse its scales.");
                ui.label("- The colour bar says which value each colour stands for: log q over the 12 nats below the peak (log scale), or q itself (linear).");
                ui.label("- The target view shows what the flow should learn: samples drawn from it, or (for an energy) its density on the same colours.");
                ui.label("- The loss is the mean -log q of the target's samples (forward KL) or the reverse KL to an energy; grey is the run before this one.");
                ui.label("- Beside the loss, where the target allows: held-out NLL (-log q of samples never trained on: it rises when the flow overfits), grid KL (how far the heat map is from the target's density), reverse KL and ESS/N (1 means the flow's samples are as good as exact ones).");
                ui.label("- steps/s and fps count wall-clock time. Any change of a setting starts a new run; the learning rate applies to the run on screen.");
                ui.separator();
                ui.label("Keys: space play/pause | s one step | r reset | ? this help");
            });
    }
}
