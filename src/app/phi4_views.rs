//! The phi^4 lab's pictures: a field configuration as a heat map, the
//! magnetization histogram, and metric curves of several runs in one plot.

use super::views::{small_plot, y_labels};
use eframe::egui::{self, Color32, Pos2, Rect, Sense, Shape, Stroke, Vec2};

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

/// One L x L configuration as a `side` x `side` heat map.
pub fn field_ui(ui: &mut egui::Ui, field: &[f64], size: usize, side: f32) -> egui::Response {
    let (response, painter) = ui.allocate_painter(Vec2::splat(side), Sense::hover());
    let rect = response.rect;
    let cell = side / size.max(1) as f32;
    for (s, &value) in field.iter().enumerate().take(size * size) {
        let (y, x) = ((s / size) as f32, (s % size) as f32);
        let min = rect.min + Vec2::new(x * cell, y * cell);
        painter.rect_filled(
            Rect::from_min_size(min, Vec2::splat(cell)),
            0.0,
            field_colour(value),
        );
    }
    painter.rect_stroke(
        rect,
        0.0,
        Stroke::new(1.0, ui.visuals().weak_text_color()),
        egui::StrokeKind::Inside,
    );
    response
}

/// The reference histogram as grey bars and each flow's as a coloured line,
/// on a shared M/V axis.
pub fn histogram_ui(
    ui: &mut egui::Ui,
    reference: &[(f64, f64)],
    flows: &[(Color32, &[(f64, f64)])],
    size: Vec2,
) -> egui::Response {
    let (response, painter) = ui.allocate_painter(size, Sense::hover());
    let rect = response.rect;
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(12.0);
    painter.text(
        rect.left_top() + Vec2::new(6.0, 4.0),
        egui::Align2::LEFT_TOP,
        "magnetization M/V: HMC (grey, both signs) and raw flow samples (lines)",
        font.clone(),
        text,
    );
    let all = reference
        .iter()
        .chain(flows.iter().flat_map(|(_, h)| h.iter()));
    let (mut lo, mut hi, mut top) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, d) in all {
        if x.is_finite() && d.is_finite() {
            lo = lo.min(x);
            hi = hi.max(x);
            top = top.max(d);
        }
    }
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || top <= 0.0 {
        return response;
    }
    // symmetric about 0, so the two modes sit where they should
    let reach = lo.abs().max(hi.abs()) * 1.05;
    let inner = Rect::from_min_max(
        rect.min + Vec2::new(10.0, 24.0),
        rect.max - Vec2::new(10.0, 22.0),
    );
    let to_x = |x: f64| inner.left() + inner.width() * ((x + reach) / (2.0 * reach)) as f32;
    let to_y = |d: f64| inner.bottom() - inner.height() * (d / top) as f32;
    if reference.len() >= 2 {
        let half = 0.5 * (reference[1].0 - reference[0].0);
        for &(x, d) in reference {
            painter.rect_filled(
                Rect::from_min_max(
                    Pos2::new(to_x(x - half), to_y(d)),
                    Pos2::new(to_x(x + half), inner.bottom()),
                ),
                0.0,
                Color32::from_gray(150).gamma_multiply(0.6),
            );
        }
    }
    for (colour, h) in flows {
        let line: Vec<Pos2> = h
            .iter()
            .filter(|(x, d)| x.is_finite() && d.is_finite())
            .map(|&(x, d)| Pos2::new(to_x(x), to_y(d)))
            .collect();
        if line.len() >= 2 {
            painter.add(Shape::line(line, Stroke::new(2.0, *colour)));
        }
    }
    let axis = Stroke::new(1.0, ui.visuals().weak_text_color());
    painter.line_segment(
        [
            Pos2::new(inner.left(), inner.bottom()),
            Pos2::new(inner.right(), inner.bottom()),
        ],
        axis,
    );
    painter.line_segment(
        [
            Pos2::new(to_x(0.0), inner.bottom()),
            Pos2::new(to_x(0.0), inner.bottom() + 4.0),
        ],
        axis,
    );
    for (x, align) in [
        (-reach, egui::Align2::LEFT_TOP),
        (0.0, egui::Align2::CENTER_TOP),
        (reach, egui::Align2::RIGHT_TOP),
    ] {
        painter.text(
            Pos2::new(to_x(x), inner.bottom() + 4.0),
            align,
            format!("{x:.2}"),
            font.clone(),
            text,
        );
    }
    response
}

/// Several runs' (step, value) series in one small plot, with the latest
/// value of each; `range` fixes the y axis (else it fits the data).
pub fn lines_ui(
    ui: &mut egui::Ui,
    title: &str,
    series: &[(Color32, &[(usize, f64)])],
    range: Option<(f64, f64)>,
    size: Vec2,
) -> egui::Response {
    let (response, painter, inner) = small_plot(ui, title, size);
    let rect = response.rect;
    let font = egui::FontId::proportional(11.0);
    let finite = |v: &f64| v.is_finite();
    let values = || {
        series
            .iter()
            .flat_map(|(_, s)| s.iter().map(|p| p.1))
            .filter(finite)
    };
    let (lo, hi) = range.unwrap_or_else(|| {
        values().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        })
    });
    let last_step = series
        .iter()
        .filter_map(|(_, s)| s.last().map(|p| p.0))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    if hi
        .partial_cmp(&lo)
        .is_none_or(|o| o == std::cmp::Ordering::Less)
    {
        return response;
    }
    let span = (hi - lo).max(1e-6);
    for (k, (colour, points)) in series.iter().enumerate() {
        // long series are thinned to about one point per pixel
        let stride = (points.len() / inner.width().max(1.0) as usize).max(1);
        let line: Vec<Pos2> = points
            .iter()
            .step_by(stride)
            .filter(|p| p.1.is_finite())
            .map(|&(step, v)| {
                Pos2::new(
                    inner.left() + inner.width() * (step as f64 / last_step) as f32,
                    inner.bottom() - inner.height() * ((v.clamp(lo, hi) - lo) / span) as f32,
                )
            })
            .collect();
        if line.len() >= 2 {
            painter.add(Shape::line(line, Stroke::new(1.5, *colour)));
        }
        if let Some(&(_, v)) = points.last() {
            painter.text(
                rect.right_top() + Vec2::new(-4.0, 2.0 + 12.0 * k as f32),
                egui::Align2::RIGHT_TOP,
                format!("{v:.3}"),
                font.clone(),
                *colour,
            );
        }
    }
    y_labels(ui, &painter, inner, lo, hi);
    response
}
