//! Small plots drawn with egui's painter: the loss curve with its running
//! mean, one metric over the steps, several runs' series, and a histogram.

use eframe::egui::{self, Color32, Pos2, Rect, Sense, Shape, Stroke, Vec2};

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
