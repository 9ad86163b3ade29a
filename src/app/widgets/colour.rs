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

/// A vertical colour bar numbered with the density values its colours
/// stand for, given the largest log density `max_log_q` of the picture (no
/// numbers before there is one).
pub fn colour_bar_ui(
    ui: &mut egui::Ui,
    scale: Scale,
    max_log_q: Option<f32>,
    height: f32,
) -> egui::Response {
    let (response, painter) = ui.allocate_painter(Vec2::new(70.0, height), Sense::hover());
    let rect = response.rect;
    // the unit on top, the bar under it, its numbers at the right
    let bar = Rect::from_min_size(
        rect.min + Vec2::new(0.0, 26.0),
        Vec2::new(14.0, height - 34.0),
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
    let text_colour = ui.visuals().text_color();
    let font = egui::FontId::proportional(12.0);
    let unit = match scale {
        Scale::Log => "log q",
        Scale::Linear => "q",
    };
    painter.text(
        Pos2::new(bar.left(), rect.top() + 4.0),
        egui::Align2::LEFT_TOP,
        unit,
        font.clone(),
        text_colour,
    );
    for (t, value) in colour_bar_ticks(scale, max_log_q) {
        let y = bar.bottom() - t * bar.height();
        painter.line_segment(
            [Pos2::new(bar.right(), y), Pos2::new(bar.right() + 4.0, y)],
            egui::Stroke::new(1.0, text_colour),
        );
        painter.text(
            Pos2::new(bar.right() + 6.0, y),
            egui::Align2::LEFT_CENTER,
            value,
            font.clone(),
            text_colour,
        );
    }
    response
}

/// The colour bar's ticks: where each sits on the bar (0 at the bottom, 1 at
/// the top) and its value, for a picture whose largest log density is `max`.
pub fn colour_bar_ticks(scale: Scale, max: Option<f32>) -> Vec<(f32, String)> {
    let Some(max) = max else {
        return Vec::new();
    };
    match scale {
        Scale::Log => (0..=4)
            .map(|k| {
                let t = k as f32 / 4.0;
                (t, format!("{:.1}", max - 12.0 * (1.0 - t)))
            })
            .collect(),
        Scale::Linear => (0..=4)
            .map(|k| {
                let t = k as f32 / 4.0;
                (t, format!("{:.2}", t * max.exp()))
            })
            .collect(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_colour_bar_is_numbered_with_what_each_colour_stands_for() {
        assert!(colour_bar_ticks(Scale::Log, None).is_empty());
        let log = colour_bar_ticks(Scale::Log, Some(-1.5));
        let values: Vec<&str> = log.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["-13.5", "-10.5", "-7.5", "-4.5", "-1.5"]);
        // each tick sits where `normalized` puts its value
        for (t, v) in &log {
            let v: f32 = v.parse().unwrap();
            assert!((normalized(&[v, -1.5], Scale::Log)[0] - t).abs() < 1e-5);
        }
        let linear = colour_bar_ticks(Scale::Linear, Some(0.0));
        assert_eq!(linear.first().map(|(_, v)| v.as_str()), Some("0.00"));
        assert_eq!(linear.last().map(|(_, v)| v.as_str()), Some("1.00"));
    }
}
