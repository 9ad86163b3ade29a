//! The playground's central panel: the model's density as a heatmap with its
//! colour bar, the deformed grid and samples over it, and the target beside it.

use super::Playground;
use super::gpu_views::{GpuViews, texels_for};
use super::picture::{Picture, VIEW};
use super::session::{Session, Status};
use crate::app::files::ViewSaver;
use crate::app::widgets::colour::{colour, colour_bar_ui, image, normalized};
use crate::app::widgets::notes::dismissable_warning_ui;
use eframe::egui::{self, Color32, Pos2, Rect, RichText, Sense, Shape, Stroke};
use glam::{Affine2, Vec2, vec2};
use std::rc::Rc;

pub use crate::app::widgets::colour::Scale;

/// The views' state between frames: textures, what is drawn over the
/// density, and where each view was drawn (for "save PNG").
pub struct Views {
    pub scale: Scale,
    pub overlays: Overlays,
    texture: Option<egui::TextureHandle>,
    /// the session picture the texture shows
    texture_version: u64,
    target_texture: Option<egui::TextureHandle>,
    /// where each view was drawn this frame
    pub rects: Vec<(&'static str, Rect)>,
    /// a view the user asked to save
    save_request: Option<&'static str>,
    /// a view on its way to a PNG
    pub saver: ViewSaver,
}

impl Default for Views {
    fn default() -> Self {
        Self {
            scale: Scale::Log,
            overlays: Overlays {
                grid: true,
                samples: true,
            },
            texture: None,
            texture_version: 0,
            target_texture: None,
            rects: Vec::new(),
            save_request: None,
            saver: ViewSaver::default(),
        }
    }
}

impl Views {
    /// Drops the textures, so the next frame draws them anew.
    pub fn forget_textures(&mut self) {
        self.texture = None;
        self.target_texture = None;
    }

    /// A new frame: the views will say where they are drawn.
    pub fn begin_frame(&mut self) {
        self.rects.clear();
    }

    pub fn set_scale(&mut self, scale: Scale) {
        if scale != self.scale {
            self.scale = scale;
            self.forget_textures();
        }
    }

    /// Where a window explaining or editing view `name` opens: over the
    /// view's top left corner (so the other view stays in sight), or near
    /// the top left of the page before the views are drawn.
    pub fn window_pos(&self, name: &str) -> egui::Pos2 {
        self.rects
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Pos2::new(280.0, 40.0), |(_, r)| r.left_top())
    }

    /// Asks for view `name` to be saved once this frame has drawn it.
    pub fn request_save(&mut self, name: &'static str) {
        self.save_request = Some(name);
    }

    /// The view the user asked to save, if any (once).
    pub fn take_save_request(&mut self) -> Option<&'static str> {
        self.save_request.take()
    }

    /// The model's density texture for `session`'s picture (made anew when
    /// the picture changed; none before the first picture arrives).
    fn model_texture(
        &mut self,
        ctx: &egui::Context,
        session: &Session,
    ) -> Option<egui::TextureHandle> {
        if session.picture_version != self.texture_version {
            self.texture = None;
            self.texture_version = session.picture_version;
        }
        if self.texture.is_none() && session.picture.n > 0 {
            let values = normalized(&session.picture.log_q, self.scale);
            self.texture = Some(ctx.load_texture(
                "model density",
                image(&values, session.picture.n),
                egui::TextureOptions::LINEAR,
            ));
        }
        self.texture.clone()
    }

    /// The target's density texture (energy targets), made once.
    fn target_texture(
        &mut self,
        ctx: &egui::Context,
        session: &Session,
    ) -> Option<egui::TextureHandle> {
        if session.target_log_density.is_empty() {
            return None;
        }
        let scale = self.scale;
        Some(
            self.target_texture
                .get_or_insert_with(|| {
                    let values = normalized(&session.target_log_density, scale);
                    ctx.load_texture(
                        "target density",
                        image(&values, 96),
                        egui::TextureOptions::LINEAR,
                    )
                })
                .clone(),
        )
    }
}

impl Playground {
    /// The central panel: the messages, then the model and target views (side
    /// by side, or one above the other on a narrow screen).
    pub(super) fn views_ui(&mut self, ui: &mut egui::Ui, show_target: bool) {
        self.messages_ui(ui);
        let available = ui.available_size();
        let narrow = self.narrow;
        // without the target (a classroom link), the model's view takes the row
        let across = if show_target { 2.0 } else { 1.0 };
        let side = if narrow {
            (available.x - 80.0).max(120.0)
        } else {
            ((available.x - 110.0) / across)
                .min(available.y - 30.0)
                .max(120.0)
        };
        self.sync_gpu_views(side * ui.ctx().pixels_per_point());
        let Some(session) = &self.session else {
            return;
        };
        // the view the GPU draws where it does, else the picture's
        let gpu_views = session.gpu_views().filter(|v| v.texture_id().is_some());
        let texture = match gpu_views.and_then(|v| v.texture_id()) {
            Some(id) => Some(id),
            None => self.views.model_texture(ui.ctx(), session).map(|t| t.id()),
        };
        let target_texture = self.views.target_texture(ui.ctx(), session);
        let (overlays, scale) = (self.views.overlays, self.views.scale);
        let max_log_q = session.picture.peak();
        let mut rects = Vec::new();
        let model_view = |ui: &mut egui::Ui, rects: &mut Vec<_>| {
            ui.vertical(|ui| {
                ui.label(RichText::new("model density q(x)").strong())
                    .on_hover_text("The flow's density: a normal distribution pushed through the flow, log q(x) = log N(z) + log |det dz/dx|.");
                let overlay = |rect| gpu_views.and_then(|v| v.overlay_callback(rect, overlays.grid, overlays.samples));
                rects.push(("density", model_ui(ui, texture, &session.picture, overlays, side, overlay)));
            });
            colour_bar_ui(ui, scale, max_log_q, side + 20.0)
                .on_hover_text("The colour of each density value: the heat map shows log q over the 12 nats below its peak (log), or q itself (linear).");
        };
        let target_view = |ui: &mut egui::Ui, rects: &mut Vec<_>| {
            ui.vertical(|ui| {
                let name = session.settings.target.label();
                ui.label(RichText::new(format!("target: {name}")).strong())
                    .on_hover_text(
                        "What the flow should learn: samples, or the density of an energy target.",
                    );
                rects.push((
                    "target",
                    target_ui(ui, &session.target_samples, target_texture.as_ref(), side),
                ));
            });
        };
        if narrow {
            ui.horizontal(|ui| model_view(ui, &mut rects));
            if show_target {
                target_view(ui, &mut rects);
            }
        } else {
            ui.horizontal(|ui| {
                model_view(ui, &mut rects);
                if show_target {
                    target_view(ui, &mut rects);
                }
            });
        }
        self.views.rects.extend(rects);
    }

    /// Has the run's model view drawn on the GPU (its heat map `pixels`
    /// texels a side, at least 512) where it trains on the device the page
    /// draws with (a 2D flow), and from the picture read back where not; the
    /// heat map follows the view's size and the colour scale.
    fn sync_gpu_views(&mut self, pixels: f32) {
        let Some(session) = &mut self.session else {
            return;
        };
        let shared = session
            .gpu_context()
            .filter(|_| session.on_gpu() && session.target.dim() == 2)
            .and_then(|ctx| Some((self.devices.render_for(ctx)?, ctx.clone())));
        let Some((render, ctx)) = shared.filter(|_| !self.heatmap_failed) else {
            if session.gpu_views().is_some() {
                session.set_gpu_views(None);
            }
            return;
        };
        let largest = ctx.device.limits().max_texture_dimension_2d as usize;
        let n = texels_for(pixels, largest);
        match session.gpu_views() {
            Some(views) if views.side() == n => views.set_scale(self.views.scale),
            _ => match GpuViews::new(&render, &ctx, n, self.views.scale) {
                Ok(views) => session.set_gpu_views(Some(Rc::new(views))),
                Err(e) => {
                    session.set_gpu_views(None);
                    self.heatmap_failed = true;
                    self.message = Some(format!(
                        "The GPU could not draw the density view ({e}); it is drawn from the CPU's picture instead."
                    ));
                }
            },
        }
    }

    /// The messages above the views: a warning, what the last action did, a
    /// question before a long run is set aside, why
    /// training stopped, and a run that makes no progress.
    fn messages_ui(&mut self, ui: &mut egui::Ui) {
        dismissable_warning_ui(ui, &mut self.message);
        if let Some(notice) = &self.notice {
            ui.label(notice);
        }
        self.asking_ui(ui);
        self.stopped_ui(ui);
        if let Some(session) = &self.session
            && let Some(idle) = session.stalled_for()
        {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!(
                    "No training step has finished for {:.0} s: {} is slow at this flow. Untick 'train on the GPU' to train on the CPU, or choose a smaller flow.",
                    idle.as_secs_f64(),
                    session.device()
                ),
            );
        }
    }

    /// A change of settings that would set aside a long run: start the new
    /// run, or keep this one (the controls go back to its settings).
    fn asking_ui(&mut self, ui: &mut egui::Ui) {
        let Some(session) = self.session.as_ref().filter(|_| self.asking) else {
            return;
        };
        let steps = session.steps_done();
        let (mut start, mut keep) = (false, false);
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.label(format!(
                "The new settings need a new run. This run's {steps} steps will be set aside (its loss curve stays, in grey)."
            ));
            ui.horizontal(|ui| {
                start = ui.button("Start the new run").clicked();
                keep = ui.button("Keep this run").clicked();
            });
        });
        if start {
            self.start_new_run();
        } else if keep {
            self.keep_run();
        }
    }

    /// Why training stopped, with the way on from the last good state at
    /// half the learning rate.
    fn stopped_ui(&mut self, ui: &mut egui::Ui) {
        let Some(session) = &mut self.session else {
            return;
        };
        let Status::Stopped(reason) = &session.status else {
            return;
        };
        let reason = reason.clone();
        let mut went_on = None;
        ui.colored_label(ui.visuals().error_fg_color, reason);
        if let Some(step) = session.go_on_step() {
            let lr = 0.5 * session.settings.learning_rate;
            if ui
                .button(format!(
                    "Go on from step {step} at half the learning rate ({lr:.1e})"
                ))
                .on_hover_text(
                    "Brings back the last good state and trains on from there, more gently.",
                )
                .clicked()
            {
                went_on = Some(session.go_on_at_half_rate());
                self.views.forget_textures();
            }
        }
        match went_on {
            Some(Ok(step)) => {
                if let Some(session) = &self.session {
                    self.settings.learning_rate = session.settings.learning_rate;
                }
                self.notice = Some(format!(
                    "Training goes on from step {step} at learning rate {:.1e}.",
                    self.settings.learning_rate
                ));
            }
            Some(Err(e)) => self.message = Some(e),
            None => {}
        }
    }
}

/// The map from data space ([`VIEW`] squared) onto `rect`, y up.
pub fn data_to_screen(rect: Rect) -> Affine2 {
    let (lo, hi) = (VIEW.0 as f32, VIEW.1 as f32);
    let scale = vec2(rect.width(), -rect.height()) / (hi - lo);
    Affine2::from_translation(vec2(rect.left(), rect.bottom()))
        * Affine2::from_scale(scale)
        * Affine2::from_translation(Vec2::splat(-lo))
}

/// A data-space point on the screen.
fn on_screen(to_screen: &Affine2, p: Vec2) -> Pos2 {
    let q = to_screen.transform_point2(p);
    Pos2::new(q.x, q.y)
}

/// What to draw over the density.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlays {
    pub grid: bool,
    pub samples: bool,
}

/// The model view: heatmap, the deformed grid shaded by |det J|, samples and
/// the radial centre; the grid and samples painted by `gpu_overlay` where
/// it paints them (from the GPU's buffers), else from the picture. Returns
/// the square it drew in.
pub fn model_ui(
    ui: &mut egui::Ui,
    texture: Option<egui::TextureId>,
    picture: &Picture,
    overlays: Overlays,
    side: f32,
    gpu_overlay: impl FnOnce(Rect) -> Option<egui::PaintCallback>,
) -> Rect {
    let (rect, painter) = density_canvas(ui, texture, side);
    if texture.is_none() {
        painter.text(
            rect.center(),
            egui::Align2::CENTER_CENTER,
            "computing the density...",
            egui::FontId::proportional(14.0),
            Color32::WHITE,
        );
    }
    let to_screen = data_to_screen(rect);
    if let Some(callback) = gpu_overlay(rect) {
        painter.add(callback);
        centre_ui(&painter, &to_screen, picture.center, picture.scale);
        frame(&painter, rect);
        return rect;
    }
    if overlays.grid {
        grid_ui(&painter, &to_screen, &picture.lines);
    }
    if overlays.samples {
        let shapes = picture
            .samples
            .iter()
            .filter(|p| p.is_finite())
            .map(|&p| {
                let at = on_screen(&to_screen, p);
                Shape::circle_filled(at, 1.3, Color32::from_rgb(255, 120, 60))
            })
            .collect::<Vec<_>>();
        painter.extend(shapes);
    }
    centre_ui(&painter, &to_screen, picture.center, picture.scale);
    frame(&painter, rect);
    rect
}

/// The deformed grid, each segment shaded by how much the flow stretches
/// there: white where |det J| > 1 (mass spreads), dark where it contracts.
fn grid_ui(painter: &egui::Painter, to_screen: &Affine2, lines: &[Vec<(Vec2, f32)>]) {
    for line in lines {
        for pair in line.windows(2) {
            let (a, ld_a) = pair[0];
            let (b, ld_b) = pair[1];
            if !(a.is_finite() && b.is_finite()) {
                continue;
            }
            let t = (0.5 + 0.25 * 0.5 * (ld_a + ld_b)).clamp(0.0, 1.0);
            let shade = (90.0 + 165.0 * t) as u8;
            painter.line_segment(
                [on_screen(to_screen, a), on_screen(to_screen, b)],
                Stroke::new(
                    1.0,
                    Color32::from_rgba_unmultiplied(shade, shade, shade, 170),
                ),
            );
        }
    }
}

/// A radial flow's centre, and the unit ellipse of its frame (where latent
/// radius 1 starts) dashed around it.
fn centre_ui(
    painter: &egui::Painter,
    to_screen: &Affine2,
    centre: Option<Vec2>,
    scale: Option<Vec2>,
) {
    let red = Color32::from_rgb(255, 60, 60);
    // (a dashed line is cut into dashes: never ask for one of unbounded length)
    let sane = |v: Vec2| v.is_finite() && v.abs().max_element() < 100.0;
    if let (Some(c), Some(s)) = (centre, scale)
        && sane(c)
        && sane(s)
    {
        let ellipse: Vec<Pos2> = (0..=64)
            .map(|k| {
                let t = std::f32::consts::TAU * k as f32 / 64.0;
                on_screen(to_screen, c + s * vec2(t.cos(), t.sin()))
            })
            .collect();
        painter.extend(Shape::dashed_line(
            &ellipse,
            Stroke::new(1.5, red),
            5.0,
            4.0,
        ));
    }
    if let Some(c) = centre {
        painter.circle_stroke(on_screen(to_screen, c), 4.0, Stroke::new(2.0, red));
    }
}

/// The target view: its samples, or its density for energy targets.
pub fn target_ui(
    ui: &mut egui::Ui,
    samples: &[Vec2],
    density: Option<&egui::TextureHandle>,
    side: f32,
) -> Rect {
    let (rect, painter) = density_canvas(ui, density.map(|t| t.id()), side);
    if density.is_none() {
        let to_screen = data_to_screen(rect);
        let shapes = samples
            .iter()
            .map(|&p| Shape::circle_filled(on_screen(&to_screen, p), 1.3, colour(0.9)))
            .collect::<Vec<_>>();
        painter.extend(shapes);
    }
    frame(&painter, rect);
    rect
}

/// A square of `side` showing `texture` over the view, or the colour map's
/// floor where there is none yet.
fn density_canvas(
    ui: &mut egui::Ui,
    texture: Option<egui::TextureId>,
    side: f32,
) -> (Rect, egui::Painter) {
    let (response, painter) = ui.allocate_painter(egui::Vec2::splat(side), Sense::hover());
    let rect = response.rect;
    match texture {
        Some(texture) => painter.image(
            texture,
            rect,
            Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
            Color32::WHITE,
        ),
        None => painter.rect_filled(rect, 0.0, colour(0.0)),
    };
    (rect, painter)
}

/// The thin border round a view.
fn frame(painter: &egui::Painter, rect: Rect) {
    painter.rect_stroke(
        rect,
        0.0,
        Stroke::new(1.0, Color32::GRAY),
        egui::StrokeKind::Inside,
    );
}
