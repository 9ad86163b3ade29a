//! "What am I looking at?": the change of variables, and what each view shows.

use super::Playground;
use eframe::egui;

impl Playground {
    /// The help window, while open.
    pub(super) fn help_ui(&mut self, ctx: &egui::Context) {
        egui::Window::new("What am I looking at")
            .open(&mut self.windows.help)
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
