//! Messages on the page: a warning the user can dismiss.

use eframe::egui;

/// Shows `message` (if any) in the warning colour with an "OK" button that
/// clears it.
pub fn dismissable_warning_ui(ui: &mut egui::Ui, message: &mut Option<String>) {
    let Some(text) = message.as_deref() else {
        return;
    };
    let mut dismiss = false;
    ui.horizontal_wrapped(|ui| {
        ui.colored_label(ui.visuals().warn_fg_color, text);
        dismiss = ui
            .small_button("OK")
            .on_hover_text("Hide this message.")
            .clicked();
    });
    if dismiss {
        *message = None;
    }
}
