//! The live views: the model's density as a heatmap with its colour bar, the
//! deformed grid and samples over it, the target beside it, and the loss curve.

use super::session::{Picture, VIEW};
use eframe::egui::{self, Color32, Pos2, Rect, Sense, Shape, Stroke, Vec2};

/// How the heatmap maps density to colour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// log q over the 12 nats below its maximum
    Log,
    /// q / max q
    Linear,
}

/// A perceptual colour map (viridis, by its control points).
pub fn colour(t: f32) -> Color32 {
    const STOPS: [[f32; 3]; 6] = [
        [68.0, 1.0, 84.0],
        [65.0, 68.0, 135.0],
        [42.0, 120.0, 142.0],
        [34.0, 168.0, 132.0],
        [122.0, 209.0, 81.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f32;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f32;
    let c = |k: usize| (STOPS[i][k] * (1.0 - f) + STOPS[i + 1][k] * f) as u8;
    Color32::from_rgb(c(0), c(1), c(2))
}

/// Colour-map values in [0, 1] for a density grid given as log densities.
pub fn normalized(log_q: &[f32], scale: Scale) -> Vec<f32> {
    let max = log_q
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    log_q
        .iter()
        .map(|&v| match scale {
            Scale::Log => (v - (max - 12.0)) / 12.0,
            Scale::Linear => (v - max).exp(),
        })
        .collect()
}

/// An egui image of an n x n grid of values in [0, 1].
pub fn image(values: &[f32], n: usize) -> egui::ColorImage {
    egui::ColorImage::new([n, n], values.iter().map(|&t| colour(t)).collect())
}

/// Maps data space ([`VIEW`] squared) into `rect`, y up.
pub fn to_screen(rect: Rect, p: [f32; 2]) -> Pos2 {
    let (lo, hi) = (VIEW.0 as f32, VIEW.1 as f32);
    Pos2::new(
        rect.left() + (p[0] - lo) / (hi - lo) * rect.width(),
        rect.bottom() - (p[1] - lo) / (hi - lo) * rect.height(),
    )
}

/// What to draw over the density.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlays {
    pub grid: bool,
    pub samples: bool,
}

/// The model view: heatmap, the deformed grid shaded by |det J|, samples and
/// the radial centre. Returns the square it drew in.
pub fn model_ui(
    ui: &mut egui::Ui,
    texture: Option<&egui::TextureHandle>,
    picture: &Picture,
    overlays: Overlays,
    side: f32,
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
    if overlays.grid {
        for line in &picture.lines {
            // colour each segment by how much the flow stretches there:
            // white where |det J| > 1 (mass spreads), dark where it contracts
            for pair in line.windows(2) {
                let (a, ld_a) = pair[0];
                let (b, ld_b) = pair[1];
                if !(a[0].is_finite() && a[1].is_finite() && b[0].is_finite() && b[1].is_finite()) {
                    continue;
                }
                let t = (0.5 + 0.25 * 0.5 * (ld_a + ld_b)).clamp(0.0, 1.0);
                let shade = (90.0 + 165.0 * t) as u8;
                painter.line_segment(
                    [to_screen(rect, a), to_screen(rect, b)],
                    Stroke::new(
                        1.0,
                        Color32::from_rgba_unmultiplied(shade, shade, shade, 170),
                    ),
                );
            }
        }
    }
    if overlays.samples {
        let shapes = picture
            .samples
            .iter()
            .filter(|p| p[0].is_finite() && p[1].is_finite())
            .map(|&p| {
                Shape::circle_filled(to_screen(rect, p), 1.3, Color32::from_rgb(255, 120, 60))
            })
            .collect::<Vec<_>>();
        painter.extend(shapes);
    }
    // (a dashed line is cut into dashes: never ask for one of unbounded length)
    let sane = |v: [f32; 2]| v.iter().all(|x| x.is_finite() && x.abs() < 100.0);
    if let (Some(c), Some(s)) = (picture.center, picture.scale)
        && sane(c)
        && sane(s)
    {
        // the unit ellipse of the flow's frame: where latent radius 1 starts
        let ellipse: Vec<Pos2> = (0..=64)
            .map(|k| {
                let t = std::f32::consts::TAU * k as f32 / 64.0;
                to_screen(rect, [c[0] + s[0] * t.cos(), c[1] + s[1] * t.sin()])
            })
            .collect();
        painter.extend(Shape::dashed_line(
            &ellipse,
            Stroke::new(1.5, Color32::from_rgb(255, 60, 60)),
            5.0,
            4.0,
        ));
    }
    if let Some(c) = picture.center {
        let p = to_screen(rect, c);
        painter.circle_stroke(p, 4.0, Stroke::new(2.0, Color32::from_rgb(255, 60, 60)));
    }
    frame(&painter, rect);
    rect
}

/// The target view: its samples, or its density for energy targets.
pub fn target_ui(
    ui: &mut egui::Ui,
    samples: &[[f32; 2]],
    density: Option<&egui::TextureHandle>,
    side: f32,
) -> Rect {
    let (rect, painter) = density_canvas(ui, density, side);
    if density.is_none() {
        let shapes = samples
            .iter()
            .map(|&p| Shape::circle_filled(to_screen(rect, p), 1.3, colour(0.9)))
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
    texture: Option<&egui::TextureHandle>,
    side: f32,
) -> (Rect, egui::Painter) {
    let (response, painter) = ui.allocate_painter(Vec2::splat(side), Sense::hover());
    let rect = response.rect;
    match texture {
        Some(texture) => painter.image(
            texture.id(),
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

/// A vertical colour bar with its end labels.
pub fn colour_bar_ui(ui: &mut egui::Ui, scale: Scale, height: f32) {
    let (response, painter) = ui.allocate_painter(Vec2::new(56.0, height), Sense::hover());
    let rect = response.rect;
    let bar = Rect::from_min_size(
        rect.min + Vec2::new(0.0, 8.0),
        Vec2::new(14.0, height - 16.0),
    );
    let steps = 64;
    for k in 0..steps {
        let t0 = k as f32 / steps as f32;
        let y = bar.bottom() - t0 * bar.height();
        let cell = Rect::from_min_max(
            Pos2::new(bar.left(), y - bar.height() / steps as f32 - 0.5),
            Pos2::new(bar.right(), y),
        );
        painter.rect_filled(cell, 0.0, colour(t0));
    }
    let (top, bottom) = match scale {
        Scale::Log => ("max", "max-12"),
        Scale::Linear => ("max", "0"),
    };
    let text_colour = ui.visuals().text_color();
    let font = egui::FontId::proportional(11.0);
    painter.text(
        Pos2::new(bar.right() + 3.0, bar.top()),
        egui::Align2::LEFT_TOP,
        top,
        font.clone(),
        text_colour,
    );
    painter.text(
        Pos2::new(bar.right() + 3.0, bar.bottom()),
        egui::Align2::LEFT_BOTTOM,
        bottom,
        font.clone(),
        text_colour,
    );
    let unit = match scale {
        Scale::Log => "log q",
        Scale::Linear => "q",
    };
    painter.text(
        Pos2::new(bar.right() + 3.0, bar.center().y),
        egui::Align2::LEFT_CENTER,
        unit,
        font,
        text_colour,
    );
}

/// The loss curve (every step, a running mean over it) with its range, and
/// `overlay` (step, value) points on the same axes (the held-out NLL).
pub fn loss_ui(
    ui: &mut egui::Ui,
    losses: &[f32],
    overlay: &[(usize, f64)],
    label: &str,
    size: Vec2,
) -> egui::Response {
    let (response, painter) = ui.allocate_painter(size, Sense::hover());
    let rect = response.rect;
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let text_colour = ui.visuals().text_color();
    let font = egui::FontId::proportional(11.0);
    if losses.len() < 2 {
        painter.text(
            rect.center(),
            egui::Align2::CENTER_CENTER,
            "press play to train",
            font,
            text_colour,
        );
        return response;
    }
    // running mean over ~1% of the run smooths the batch noise
    let window = (losses.len() / 100).max(1);
    let mut smooth = Vec::with_capacity(losses.len());
    let mut sum = 0.0f64;
    for (i, &v) in losses.iter().enumerate() {
        sum += v as f64;
        if i >= window {
            sum -= losses[i - window] as f64;
        }
        smooth.push((sum / (i + 1).min(window) as f64) as f32);
    }
    // the range of the smoothed curve after its first 5% of steps, so the
    // early spike of a fresh model does not flatten the rest (it is clipped)
    let skip = if smooth.len() >= 40 {
        smooth.len() / 20
    } else {
        0
    };
    let (lo, hi) = smooth[skip..]
        .iter()
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !(lo.is_finite() && hi.is_finite()) {
        return response;
    }
    let span = (hi - lo).max(1e-3);
    let inner = rect.shrink2(Vec2::new(44.0, 10.0));
    let stride = (losses.len() / 800).max(1);
    let to_point = |i: usize, v: f32| {
        Pos2::new(
            inner.left() + inner.width() * i as f32 / (losses.len() - 1) as f32,
            inner.bottom() - inner.height() * (v - lo) / span,
        )
    };
    let raw: Vec<Pos2> = (0..losses.len())
        .step_by(stride)
        .map(|i| to_point(i, losses[i].clamp(lo - 0.05 * span, hi + 0.05 * span)))
        .collect();
    painter.add(Shape::line(
        raw,
        Stroke::new(1.0, Color32::from_rgba_unmultiplied(120, 160, 255, 70)),
    ));
    let mean: Vec<Pos2> = (0..smooth.len())
        .step_by(stride)
        .map(|i| to_point(i, smooth[i].clamp(lo - 0.05 * span, hi + 0.05 * span)))
        .collect();
    painter.add(Shape::line(
        mean,
        Stroke::new(2.0, Color32::from_rgb(120, 160, 255)),
    ));
    let marks: Vec<Pos2> = overlay
        .iter()
        .filter(|(step, v)| *step >= 1 && *step <= losses.len() && v.is_finite())
        .map(|&(step, v)| {
            let v = (v as f32).clamp(lo - 0.05 * span, hi + 0.05 * span);
            to_point(step - 1, v)
        })
        .collect();
    painter.add(Shape::line(
        marks,
        Stroke::new(1.5, Color32::from_rgb(255, 150, 60)),
    ));
    painter.text(
        Pos2::new(rect.left() + 4.0, inner.top()),
        egui::Align2::LEFT_TOP,
        format!("{hi:.3}"),
        font.clone(),
        text_colour,
    );
    painter.text(
        Pos2::new(rect.left() + 4.0, inner.bottom()),
        egui::Align2::LEFT_BOTTOM,
        format!("{lo:.3}"),
        font.clone(),
        text_colour,
    );
    painter.text(
        Pos2::new(inner.right(), rect.top() + 2.0),
        egui::Align2::RIGHT_TOP,
        format!("{label} | step {}", losses.len()),
        font,
        text_colour,
    );
    response
}

/// A small plot's canvas: its background and `title` at the top left; returns
/// the painter and the plotting area inside (room for the y labels at the left).
pub fn small_plot(
    ui: &mut egui::Ui,
    title: &str,
    size: Vec2,
) -> (egui::Response, egui::Painter, Rect) {
    let (response, painter) = ui.allocate_painter(size, Sense::hover());
    let rect = response.rect;
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    painter.text(
        rect.left_top() + Vec2::new(4.0, 2.0),
        egui::Align2::LEFT_TOP,
        title,
        egui::FontId::proportional(11.0),
        ui.visuals().text_color(),
    );
    let inner = Rect::from_min_max(
        rect.min + Vec2::new(36.0, 18.0),
        rect.max - Vec2::new(6.0, 6.0),
    );
    (response, painter, inner)
}

/// The y range of a [`small_plot`]: `hi` at the top of `inner`, `lo` at its bottom.
pub fn y_labels(ui: &egui::Ui, painter: &egui::Painter, inner: Rect, lo: f64, hi: f64) {
    for (v, y, align) in [
        (hi, inner.top(), egui::Align2::LEFT_TOP),
        (lo, inner.bottom(), egui::Align2::LEFT_BOTTOM),
    ] {
        painter.text(
            Pos2::new(inner.left() - 33.0, y),
            align,
            format!("{v:.2}"),
            egui::FontId::proportional(11.0),
            ui.visuals().text_color(),
        );
    }
}

/// A small plot of one metric over the steps, with its latest value.
pub fn series_ui(
    ui: &mut egui::Ui,
    title: &str,
    points: &[(usize, f64)],
    size: Vec2,
) -> egui::Response {
    let latest = points
        .last()
        .map_or("-".to_string(), |(_, v)| format!("{v:.3}"));
    let (response, painter, inner) = small_plot(ui, &format!("{title}: {latest}"), size);
    if points.len() < 2 {
        return response;
    }
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(_, v)| {
            (a.min(v), b.max(v))
        });
    let span = (hi - lo).max(1e-6);
    let last_step = points.last().map_or(1, |p| p.0).max(1) as f64;
    let line: Vec<Pos2> = points
        .iter()
        .map(|&(step, v)| {
            Pos2::new(
                inner.left() + inner.width() * (step as f64 / last_step) as f32,
                inner.bottom() - inner.height() * ((v - lo) / span) as f32,
            )
        })
        .collect();
    painter.add(Shape::line(
        line,
        Stroke::new(1.5, Color32::from_rgb(255, 150, 60)),
    ));
    y_labels(ui, &painter, inner, lo, hi);
    response
}
