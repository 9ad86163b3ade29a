//! Small plots drawn with egui's painter: the loss curve with its running
//! mean, one metric over the steps, several runs' series, and a histogram.

use eframe::egui::{self, Color32, Pos2, Rect, Sense, Shape, Stroke, Vec2};

/// A running mean over about 1% of the run, which smooths the batch noise.
pub fn running_mean(losses: &[f32]) -> Vec<f32> {
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
    smooth
}

/// The range of the smoothed curve after its first 5% of steps, so the early
/// spike of a fresh model does not flatten the rest (it is clipped).
fn loss_range(smooth: &[f32]) -> Option<(f32, f32)> {
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
    let (lo, hi) = at_least(lo as f64, hi as f64, 0.1);
    (lo.is_finite() && hi.is_finite()).then_some((lo as f32, hi as f32))
}

/// What the loss plot shows besides the run's own losses.
pub struct LossPlot<'a> {
    /// (step, value) points on the same axes (the held-out NLL)
    pub overlay: &'a [(usize, f64)],
    /// an earlier run's losses, drawn grey behind, and what it was
    pub ghost: Option<(&'a [f32], &'a str)>,
    /// what the axis measures
    pub label: &'a str,
    /// what to say while there is no curve yet
    pub hint: &'a str,
}

/// The loss curve (every step, a running mean over it) with its range, the
/// plot's overlay, and a previous run's running mean in grey for comparison.
pub fn loss_ui(
    ui: &mut egui::Ui,
    losses: &[f32],
    plot: &LossPlot<'_>,
    size: Vec2,
) -> egui::Response {
    let (response, painter) = ui.allocate_painter(size, Sense::hover());
    let rect = response.rect;
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let text_colour = ui.visuals().text_color();
    let font = egui::FontId::proportional(12.0);
    let smooth = running_mean(losses);
    let ghost = plot.ghost.map(|(g, label)| (running_mean(g), label));
    // the axes follow this run; before it has a curve, the previous one's
    let range = match &ghost {
        Some((g, _)) if losses.len() < 2 => loss_range(g),
        _ => loss_range(&smooth).filter(|_| losses.len() >= 2),
    };
    let Some((lo, hi)) = range else {
        let at = rect.center();
        painter.text(
            at,
            egui::Align2::CENTER_CENTER,
            plot.hint,
            font,
            text_colour,
        );
        return response;
    };
    let inner = rect.shrink2(Vec2::new(48.0, 16.0));
    let steps = losses.len().max(ghost.as_ref().map_or(0, |(g, _)| g.len()));
    let axes = Axes::new(inner, steps, lo, hi);
    if let Some((g, label)) = &ghost {
        let grey = Color32::from_gray(128);
        painter.add(Shape::line(axes.curve(g), Stroke::new(1.5, grey)));
        painter.text(
            Pos2::new(inner.left(), rect.bottom() - 2.0),
            egui::Align2::LEFT_BOTTOM,
            format!("grey: the previous run ({label})"),
            font.clone(),
            grey,
        );
    }
    let faint = Color32::from_rgba_unmultiplied(120, 160, 255, 70);
    painter.add(Shape::line(axes.curve(losses), Stroke::new(1.0, faint)));
    let blue = Color32::from_rgb(120, 160, 255);
    painter.add(Shape::line(axes.curve(&smooth), Stroke::new(2.0, blue)));
    let marks: Vec<Pos2> = plot
        .overlay
        .iter()
        .filter(|(step, v)| *step >= 1 && *step <= losses.len() && v.is_finite())
        .map(|&(step, v)| axes.point(step - 1, v as f32))
        .collect();
    let orange = Color32::from_rgb(255, 150, 60);
    painter.add(Shape::line(marks, Stroke::new(1.5, orange)));
    let left = rect.left() + 4.0;
    let labels = [
        (
            Pos2::new(left, inner.top()),
            egui::Align2::LEFT_TOP,
            format!("{hi:.3}"),
        ),
        (
            Pos2::new(left, inner.bottom()),
            egui::Align2::LEFT_BOTTOM,
            format!("{lo:.3}"),
        ),
        (
            Pos2::new(inner.right(), rect.top() + 2.0),
            egui::Align2::RIGHT_TOP,
            format!("{} | step {}", plot.label, losses.len()),
        ),
    ];
    for (at, align, text) in labels {
        painter.text(at, align, text, font.clone(), text_colour);
    }
    response
}

/// The loss plot's axes: step `i` of `n` across, values in `lo..hi` up
/// (clipped a little beyond).
struct Axes {
    inner: Rect,
    n: usize,
    lo: f32,
    hi: f32,
}

impl Axes {
    fn new(inner: Rect, n: usize, lo: f32, hi: f32) -> Self {
        Self { inner, n, lo, hi }
    }

    fn point(&self, i: usize, v: f32) -> Pos2 {
        let span = (self.hi - self.lo).max(1e-3);
        let v = v.clamp(self.lo - 0.05 * span, self.hi + 0.05 * span);
        Pos2::new(
            self.inner.left() + self.inner.width() * i as f32 / (self.n - 1).max(1) as f32,
            self.inner.bottom() - self.inner.height() * (v - self.lo) / span,
        )
    }

    /// `values` as a polyline, thinned to about 800 points.
    fn curve(&self, values: &[f32]) -> Vec<Pos2> {
        let stride = (values.len() / 800).max(1);
        (0..values.len())
            .step_by(stride)
            .map(|i| self.point(i, values[i]))
            .collect()
    }
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
        egui::FontId::proportional(12.0),
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
            egui::FontId::proportional(12.0),
            ui.visuals().text_color(),
        );
    }
}

/// A value range widened to at least `min_span` about its middle, so that
/// noise on a flat curve is not blown up to the plot's full height.
pub fn at_least(lo: f64, hi: f64, min_span: f64) -> (f64, f64) {
    let grow = 0.5 * (min_span - (hi - lo)).max(0.0);
    (lo - grow, hi + grow)
}

/// A small plot of one metric over the steps, with its latest value, on
/// `fixed` axes (ESS/N from 0 to 1) or its own range, at least 5% of its
/// size wide.
pub fn series_ui(
    ui: &mut egui::Ui,
    title: &str,
    points: &[(usize, f64)],
    fixed: Option<(f64, f64)>,
    size: Vec2,
) -> egui::Response {
    let latest = points
        .last()
        .map_or("-".to_string(), |(_, v)| format!("{v:.3}"));
    let (response, painter, inner) = small_plot(ui, &format!("{title}: {latest}"), size);
    if points.len() < 2 {
        return response;
    }
    let (lo, hi) = fixed.unwrap_or_else(|| {
        let (lo, hi) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(_, v)| {
                (a.min(v), b.max(v))
            });
        at_least(lo, hi, 0.05 * lo.abs().max(hi.abs()).max(0.2))
    });
    let span = (hi - lo).max(1e-6);
    let last_step = points.last().map_or(1, |p| p.0).max(1) as f64;
    let line: Vec<Pos2> = points
        .iter()
        .map(|&(step, v)| {
            Pos2::new(
                inner.left() + inner.width() * (step as f64 / last_step) as f32,
                inner.bottom() - inner.height() * ((v - lo) / span).clamp(0.0, 1.0) as f32,
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
    let inner = Rect::from_min_max(
        rect.min + Vec2::new(10.0, 24.0),
        rect.max - Vec2::new(10.0, 22.0),
    );
    // symmetric about 0, so the two modes sit where they should
    let axes = HistogramAxes {
        inner,
        reach: lo.abs().max(hi.abs()) * 1.05,
        top,
    };
    axes.bars(&painter, reference);
    for (colour, h) in flows {
        let line: Vec<Pos2> = h
            .iter()
            .filter(|(x, d)| x.is_finite() && d.is_finite())
            .map(|&(x, d)| Pos2::new(axes.x(x), axes.y(d)))
            .collect();
        if line.len() >= 2 {
            painter.add(Shape::line(line, Stroke::new(2.0, *colour)));
        }
    }
    axes.x_axis(ui, &painter, font);
    response
}

/// A histogram's axes: M/V in `-reach..reach` across, densities in `0..top` up.
struct HistogramAxes {
    inner: Rect,
    reach: f64,
    top: f64,
}

impl HistogramAxes {
    fn x(&self, x: f64) -> f32 {
        let inner = self.inner;
        inner.left() + inner.width() * ((x + self.reach) / (2.0 * self.reach)) as f32
    }

    fn y(&self, d: f64) -> f32 {
        self.inner.bottom() - self.inner.height() * (d / self.top) as f32
    }

    /// The reference as grey bars.
    fn bars(&self, painter: &egui::Painter, reference: &[(f64, f64)]) {
        if reference.len() < 2 {
            return;
        }
        let half = 0.5 * (reference[1].0 - reference[0].0);
        let grey = Color32::from_gray(150).gamma_multiply(0.6);
        for &(x, d) in reference {
            let bar = Rect::from_min_max(
                Pos2::new(self.x(x - half), self.y(d)),
                Pos2::new(self.x(x + half), self.inner.bottom()),
            );
            painter.rect_filled(bar, 0.0, grey);
        }
    }

    /// The M/V axis with its ends and 0 marked.
    fn x_axis(&self, ui: &egui::Ui, painter: &egui::Painter, font: egui::FontId) {
        let bottom = self.inner.bottom();
        let axis = Stroke::new(1.0, ui.visuals().weak_text_color());
        painter.line_segment(
            [
                Pos2::new(self.inner.left(), bottom),
                Pos2::new(self.inner.right(), bottom),
            ],
            axis,
        );
        let zero = self.x(0.0);
        painter.line_segment(
            [Pos2::new(zero, bottom), Pos2::new(zero, bottom + 4.0)],
            axis,
        );
        for (x, align) in [
            (-self.reach, egui::Align2::LEFT_TOP),
            (0.0, egui::Align2::CENTER_TOP),
            (self.reach, egui::Align2::RIGHT_TOP),
        ] {
            painter.text(
                Pos2::new(self.x(x), bottom + 4.0),
                align,
                format!("{x:.2}"),
                font.clone(),
                ui.visuals().text_color(),
            );
        }
    }
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
    let font = egui::FontId::proportional(12.0);
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
