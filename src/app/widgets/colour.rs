//! Colour maps: a perceptual one for densities (with its colour bar) and a
//! diverging one for signed fields.

use eframe::egui::{self, Color32, Pos2, Rect, Sense, Vec2};

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

/// Field values beyond this are drawn at full colour.
const FIELD_RANGE: f64 = 2.0;

/// A diverging colour map for the field: blue negative, white 0, red positive.
pub fn field_colour(value: f64) -> Color32 {
    let t = if value.is_finite() {
        (value / FIELD_RANGE).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let fade = |full: f64| (255.0 + (full - 255.0) * t.abs()) as u8;
    if t >= 0.0 {
        Color32::from_rgb(fade(200.0), fade(40.0), fade(40.0))
    } else {
        Color32::from_rgb(fade(40.0), fade(80.0), fade(200.0))
    }
}
