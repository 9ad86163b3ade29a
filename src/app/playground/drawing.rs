//! Draw-your-own targets: a small canvas painted with a soft brush; the paint
//! becomes a density (an [`ImageDensity`] over the same square the view shows).

use super::Playground;
use crate::app::widgets::colour::colour;
use crate::target::ImageDensity;
use eframe::egui::{self, Color32, Rect, Sense, Vec2};

/// Cells a side of the drawing.
const CELLS: usize = 64;

/// The paint so far.
pub struct Drawing {
    /// paint per cell, row-major from the top-left, each in [0, 1]
    paint: Vec<f32>,
    /// brush radius in cells
    pub brush: f32,
}

/// What the user asked of the drawing window.
pub enum DrawingAction {
    Nothing,
    /// train on this density
    Use(ImageDensity),
    Close,
}

impl Default for Drawing {
    fn default() -> Self {
        Self {
            paint: vec![0.0; CELLS * CELLS],
            brush: 3.0,
        }
    }
}

impl Drawing {
    /// Adds paint around `(col, row)` (in cells) with a soft round brush.
    pub fn paint_at(&mut self, col: f32, row: f32) {
        let r = self.brush;
        let reach = r.ceil() as i64 + 1;
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let (c, w) = (col.floor() as i64 + dx, row.floor() as i64 + dy);
                if c < 0 || w < 0 || c >= CELLS as i64 || w >= CELLS as i64 {
                    continue;
                }
                let d2 = (c as f32 + 0.5 - col).powi(2) + (w as f32 + 0.5 - row).powi(2);
                let add = 0.35 * (-d2 / (0.5 * r * r)).exp();
                let cell = &mut self.paint[w as usize * CELLS + c as usize];
                *cell = (*cell + add).min(1.0);
            }
        }
    }

    /// Whether anything has been painted.
    pub fn is_empty(&self) -> bool {
        self.paint.iter().all(|&v| v <= 0.0)
    }

    /// The paint as a density.
    pub fn density(&self) -> Result<ImageDensity, String> {
        let weights: Vec<f64> = self.paint.iter().map(|&v| v as f64).collect();
        ImageDensity::from_weights(CELLS, CELLS, &weights)
            .map_err(|_| "paint something first: the drawing is empty".to_string())
    }

    /// The drawing window (at `at`, inside `area`): the canvas, the brush
    /// size, and its buttons.
    pub fn window(
        &mut self,
        ctx: &egui::Context,
        at: egui::Pos2,
        area: egui::Rect,
    ) -> DrawingAction {
        let mut action = DrawingAction::Nothing;
        let mut open = true;
        egui::Window::new("Draw a density")
            .constrain_to(area)
            .default_pos(at)
            .open(&mut open)
            .resizable(false)
            .show(ctx, |ui| {
                ui.label("Paint where the mass should be; the flow learns to draw it.");
                let (response, painter) =
                    ui.allocate_painter(Vec2::splat(320.0), Sense::click_and_drag());
                let rect = response.rect;
                if let Some(p) = response.interact_pointer_pos()
                    && (response.dragged() || response.clicked())
                    && rect.contains(p)
                {
                    let cell = rect.width() / CELLS as f32;
                    self.paint_at((p.x - rect.left()) / cell, (p.y - rect.top()) / cell);
                }
                painter.rect_filled(rect, 0.0, colour(0.0));
                let cell = rect.width() / CELLS as f32;
                for (i, &v) in self.paint.iter().enumerate() {
                    if v > 0.01 {
                        let min =
                            rect.min + Vec2::new((i % CELLS) as f32, (i / CELLS) as f32) * cell;
                        painter.rect_filled(
                            Rect::from_min_size(min, Vec2::splat(cell)),
                            0.0,
                            colour(v),
                        );
                    }
                }
                painter.rect_stroke(
                    rect,
                    0.0,
                    egui::Stroke::new(1.0, Color32::GRAY),
                    egui::StrokeKind::Inside,
                );
                ui.add(egui::Slider::new(&mut self.brush, 1.0..=8.0).text("brush"));
                ui.horizontal(|ui| {
                    let train = ui
                        .add_enabled(!self.is_empty(), egui::Button::new("Train on this"))
                        .on_hover_text("Make this drawing the target and start a new run.");
                    if train.clicked()
                        && let Ok(density) = self.density()
                    {
                        action = DrawingAction::Use(density);
                    }
                    if ui.button("Clear").clicked() {
                        self.paint.iter_mut().for_each(|v| *v = 0.0);
                    }
                });
            });
        if !open {
            action = DrawingAction::Close;
        }
        action
    }
}

impl Playground {
    /// The drawing window, while open.
    pub(super) fn drawing_ui(&mut self, ctx: &egui::Context, area: egui::Rect) {
        let at = self.views.window_pos("target");
        let Some(drawing) = &mut self.windows.drawing else {
            return;
        };
        match drawing.window(ctx, at, area) {
            DrawingAction::Nothing => {}
            DrawingAction::Close => self.windows.drawing = None,
            DrawingAction::Use(density) => self.use_drawing(density),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn paint_becomes_a_density_where_it_was_painted() {
        let mut drawing = Drawing::default();
        assert!(drawing.density().is_err(), "an empty drawing has no mass");
        // a blob in the top-right quarter
        for _ in 0..5 {
            drawing.paint_at(48.0, 16.0);
        }
        let density = drawing.density().unwrap();
        let mut rng = Rng::seeded(1);
        let samples: Vec<[f64; 2]> = (0..500).map(|_| density.sample(&mut rng)).collect();
        let right_and_up = samples.iter().filter(|p| p[0] > 0.0 && p[1] > 0.0).count();
        assert!(
            right_and_up > 490,
            "{right_and_up} of 500 in the painted quarter"
        );
        assert!(density.log_density(&[1.75, 1.75]) > density.log_density(&[-1.75, -1.75]));
    }
}
