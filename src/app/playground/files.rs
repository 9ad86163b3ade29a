//! What the playground reads and writes: an uploaded or dropped image as the
//! target, models exported and imported in the CLI's format, a model as a
//! Python script for bijx, and any view saved as a PNG.

use super::Playground;
use super::model_io;
use super::session::Status;
use super::settings::{Settings, TargetChoice};
use crate::app::files::{self, Upload};
use crate::run::bijx_script::bijx_script;
use crate::target::{ImageDensity, Target};
use eframe::egui;

impl Playground {
    /// Opens the browser's file picker (natively, says to drop the file).
    pub(super) fn pick_file(&mut self, accept: &str) {
        if let Err(e) = files::pick(accept, &self.upload) {
            self.notice = Some(format!("To open a file here, {e}."));
        }
    }

    /// Takes in files from the picker or dropped onto the window: a model
    /// (JSON) or an image.
    pub(super) fn take_files(&mut self, ctx: &egui::Context) {
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
    fn use_image(&mut self, file: Upload) {
        match ImageDensity::from_bytes_auto(&file.bytes) {
            Ok((density, inverted)) => {
                self.custom_target = Some(Target::Image(density));
                self.settings.target = TargetChoice::Upload(file.name.clone());
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

    /// Uses the drawing window's density as the target, and starts training.
    pub(super) fn use_drawing(&mut self, density: ImageDensity) {
        self.custom_target = Some(Target::Image(density));
        self.settings.target = TargetChoice::Drawing;
        self.reset();
        if let Some(session) = &mut self.session {
            session.status = super::session::Status::Running;
        }
    }

    /// Starts a paused run from an imported model, with its settings.
    fn import_model(&mut self, file: Upload) {
        match model_io::import(&file.bytes, &self.settings) {
            Ok(imported) => {
                self.settings = imported.settings;
                if !matches!(self.settings.target, TargetChoice::Preset(_))
                    && self.custom_target.is_none()
                {
                    self.settings.target = Settings::default().target;
                }
                self.imported = Some((imported.step, imported.model));
                self.reset();
                let mut notice = format!(
                    "Imported {} (trained for {} steps); press play to train on.",
                    file.name, imported.step
                );
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
    pub(super) fn export_model(&mut self) {
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

    /// Saves the current model as a Python script that rebuilds it in bijx
    /// and checks it there (a download in a browser); a diverged model is
    /// refused with the reason.
    pub(super) fn export_bijx_script(&mut self) {
        let Some(session) = &self.session else {
            return;
        };
        if let Status::Stopped(why) = &session.status {
            self.message = Some(format!(
                "Cannot export as Python: the run stopped ({why}). Restore its last good state first, then export that."
            ));
            return;
        }
        let Some((step, model)) = session.model() else {
            self.notice =
                Some("The model is on its way from the GPU; try again in a moment.".into());
            return;
        };
        let target = session.target.name();
        let origin = format!("trained in the playground on {target} for {step} steps");
        match bijx_script(&model, &origin) {
            Ok(script) => {
                let name = format!("flowplay-{target}-step{step}-bijx.py");
                self.notice = Some(
                    match files::save(&name, "text/x-python", script.as_bytes()) {
                        Ok(done) => {
                            format!("{done} (run it with Python and bijx 1.3.2; it checks itself).")
                        }
                        Err(e) => e,
                    },
                );
            }
            Err(e) => self.message = Some(format!("Cannot export as Python: {e}.")),
        }
    }

    /// Asks the renderer for a screenshot to cut the view the user asked
    /// for from, once this frame has drawn it.
    pub(super) fn save_requested_view(&mut self, ctx: &egui::Context) {
        let Some(name) = self.views.take_save_request() else {
            return;
        };
        let Some(&(_, rect)) = self.views.rects.iter().find(|(n, _)| *n == name) else {
            self.notice = Some(format!("There is no {name} view to save yet."));
            return;
        };
        let step = self.session.as_ref().map_or(0, |s| s.steps_done());
        let file = format!("flowplay-{name}-step{step}.png");
        self.views.saver.request(ctx, file, rect);
    }

    /// Saves the view once its screenshot has arrived.
    pub(super) fn finish_screenshot(&mut self, ctx: &egui::Context) {
        if let Some(done) = self.views.saver.finish(ctx) {
            self.notice = Some(done);
        }
    }
}
