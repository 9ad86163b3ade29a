//! Both pages' plots, drawn with `egui_plot`: the loss curve with its running
//! mean, one metric over the steps, several runs' series, and a histogram.
//! Each has labelled axes with ticks, a readout of the value under the
//! pointer, a legend where it shows several series, and zoom and pan (drag to
//! pan, ctrl + wheel or a right-drag box to zoom, double-click to fit again;
//! the wheel alone still scrolls the page). Each returns the whole plot's
//! response with its title's inside: the title carries the plot's
//! explanation on hover, since the plot itself shows the readout there.

use eframe::egui::{self, Color32, RichText, Vec2};
use egui_plot::{
    AxisHints, Bar, BarChart, Corner, GridInput, GridMark, HoverPosition, Legend, Line, Plot,
    PlotPoints,
};

/// A run's (step, value) points, with its colour and name for the legend.
pub type NamedSeries<'a> = (Color32, &'a str, &'a [(usize, f64)]);

/// A histogram's (bin centre, density) points, with its colour and name.
pub type NamedHistogram<'a> = (Color32, &'a str, &'a [(f64, f64)]);

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
fn loss_range(smooth: &[f32]) -> Option<(f64, f64)> {
    let skip = if smooth.len() >= 40 {
        smooth.len() / 20
    } else {
        0
    };
    let (lo, hi) = smooth[skip..]
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v as f64), b.max(v as f64))
        });
    let (lo, hi) = at_least(lo, hi, 0.1);
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// A value range widened to at least `min_span` about its middle, so that
/// noise on a flat curve is not blown up to the plot's full height.
pub fn at_least(lo: f64, hi: f64, min_span: f64) -> (f64, f64) {
    let grow = 0.5 * (min_span - (hi - lo)).max(0.0);
    (lo - grow, hi + grow)
}

/// Steps `0..values.len()` (step i + 1 for value i) as plot points, thinned
/// to about `most` points and clipped into `range`.
fn step_points(values: &[f32], range: (f64, f64), most: usize) -> PlotPoints<'static> {
    let stride = (values.len() / most).max(1);
    let (lo, hi) = range;
    let margin = 0.05 * (hi - lo);
    (0..values.len())
        .step_by(stride)
        .filter(|&i| values[i].is_finite())
        .map(|i| {
            let v = (values[i] as f64).clamp(lo - margin, hi + margin);
            [(i + 1) as f64, v]
        })
        .collect()
}

/// (step, value) points, thinned to about `most` and without non-finite values.
fn series_points(points: &[(usize, f64)], most: usize) -> PlotPoints<'static> {
    let stride = (points.len() / most).max(1);
    points
        .iter()
        .step_by(stride)
        .filter(|p| p.1.is_finite())
        .map(|&(step, v)| [step as f64, v])
        .collect()
}

/// The readout under the pointer: the nearest curve's name, its step and
/// value; away from the curves, the step and value the pointer is at.
fn step_readout(pos: &HoverPosition<'_>) -> Option<String> {
    Some(match pos {
        HoverPosition::NearDataPoint {
            plot_name,
            position,
            ..
        } => format!("{plot_name}\nat step {:.0}: {:.4}", position.x, position.y),
        HoverPosition::Elsewhere { position } => {
            format!("at step {:.0}: {:.4}", position.x, position.y)
        }
    })
}

/// Grid lines and ticks at 1, 2 and 5 times powers of ten: the first such
/// size above the smallest spacing egui_plot allows, and the second and
/// fourth after it (about 5 and 25 times that spacing), so that a small plot
/// still numbers its axes (powers of ten alone left a flat loss curve with no
/// numbered tick: the next power was too far apart to fit, the one below too
/// close to label).
pub fn nice_grid(input: GridInput) -> Vec<GridMark> {
    let base = input.base_step_size.abs();
    if !(base.is_finite() && base > 0.0) {
        return Vec::new();
    }
    let mut decade = 10f64.powf(base.log10().floor());
    let mut ladder = Vec::with_capacity(5);
    while ladder.len() < 5 {
        for factor in [1.0, 2.0, 5.0] {
            let size = decade * factor;
            if size >= base && ladder.len() < 5 {
                ladder.push(size);
            }
        }
        decade *= 10.0;
    }
    let sizes = [ladder[0], ladder[2], ladder[4]];
    let (lo, hi) = input.bounds;
    let mut marks: Vec<GridMark> = Vec::new();
    // the coarsest first, so a value on several grids keeps its largest step
    for &size in sizes.iter().rev() {
        let (first, last) = ((lo / size).ceil(), (hi / size).floor());
        if !(first.is_finite() && last.is_finite()) || last - first > 2000.0 {
            continue;
        }
        let mut k = first;
        while k <= last {
            // (+ 0.0 turns -0 into 0, which the axis would print as "-0")
            let value = k * size + 0.0;
            if !marks
                .iter()
                .any(|m| (m.value - value).abs() < 0.1 * sizes[0])
            {
                marks.push(GridMark {
                    value,
                    step_size: size,
                });
            }
            k += 1.0;
        }
    }
    marks.sort_by(|a, b| a.value.total_cmp(&b.value));
    marks
}

/// A tick's number with as many decimals as its step needs (0.5 -> one;
/// egui_plot's default rounds the decimals of 0.5 to none and prints "0"),
/// and never "-0".
pub fn tick_label(mark: GridMark, _range: &std::ops::RangeInclusive<f64>) -> String {
    let decimals = (-mark.step_size.log10()).ceil().max(0.0) as usize;
    let text = format!("{:.*}", decimals, mark.value);
    match text.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => text,
    }
}

/// A plot with the pages' habits: axes labelled and numbered, the wheel left
/// to the page.
fn plot<'a>(id: &str, x_label: &str, y_label: &str, size: Vec2) -> Plot<'a> {
    Plot::new(id)
        .width(size.x)
        .height(size.y)
        .x_grid_spacer(nice_grid)
        .y_grid_spacer(nice_grid)
        // numbers as close as 40 points apart (egui_plot's default of 60
        // left an M/V axis of -0.4..0.4 with one number)
        .custom_x_axes(vec![
            AxisHints::new_x()
                .label(RichText::new(x_label).small())
                .label_spacing(40.0..=60.0)
                .formatter(tick_label),
        ])
        .y_axis_formatter(tick_label)
        .y_axis_label(RichText::new(y_label).small())
        .allow_scroll(false)
        .show_crosshair(false)
        .y_axis_min_width(34.0)
}

/// A plot's title above it, small and strong: its response carries the
/// plot's explanation on hover (the plot itself shows its readout).
fn title_ui(ui: &mut egui::Ui, title: &str) -> egui::Response {
    ui.label(RichText::new(title).small().strong())
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

/// The loss curve (every step, a running mean over it), the plot's overlay,
/// and a previous run's running mean in grey for comparison, with a legend.
pub fn loss_ui(
    ui: &mut egui::Ui,
    losses: &[f32],
    loss: &LossPlot<'_>,
    size: Vec2,
) -> egui::InnerResponse<egui::Response> {
    ui.vertical(|ui| {
        let title = title_ui(ui, &format!("{} | step {}", loss.label, losses.len()));
        let size = Vec2::new(size.x, (size.y - 18.0).max(40.0));
        let smooth = running_mean(losses);
        let ghost = loss.ghost.map(|(g, label)| (running_mean(g), label));
        // the axes follow this run; before it has a curve, the previous one's
        let range = match &ghost {
            Some((g, _)) if losses.len() < 2 => loss_range(g),
            _ => loss_range(&smooth).filter(|_| losses.len() >= 2),
        };
        let Some(range) = range else {
            let (rect, _) = ui.allocate_exact_size(size, egui::Sense::hover());
            ui.painter().text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                loss.hint,
                egui::FontId::proportional(13.0),
                ui.visuals().text_color(),
            );
            return title;
        };
        let most = (size.x as usize).max(100);
        plot("loss", "step", "nats", size)
            .legend(Legend::default().position(Corner::RightTop))
            .label_formatter(step_readout)
            .show(ui, |plot_ui| {
                if let Some((g, label)) = &ghost {
                    plot_ui.line(
                        Line::new(
                            format!("previous run ({label})"),
                            step_points(g, range, most),
                        )
                        .color(Color32::from_gray(128)),
                    );
                }
                let faint = Color32::from_rgba_unmultiplied(120, 160, 255, 70);
                plot_ui.line(
                    Line::new("loss", step_points(losses, range, most))
                        .color(faint)
                        .width(1.0),
                );
                plot_ui.line(
                    Line::new("running mean", step_points(&smooth, range, most))
                        .color(Color32::from_rgb(120, 160, 255))
                        .width(2.0),
                );
                if !loss.overlay.is_empty() {
                    plot_ui.line(
                        Line::new("held-out NLL", series_points(loss.overlay, most))
                            .color(Color32::from_rgb(255, 150, 60)),
                    );
                }
            });
        title
    })
}

/// One metric over the steps, with its latest value in the title, on `fixed`
/// axes (ESS/N from 0 to 1) or fitted to its values.
pub fn series_ui(
    ui: &mut egui::Ui,
    title: &str,
    points: &[(usize, f64)],
    fixed: Option<(f64, f64)>,
    size: Vec2,
) -> egui::InnerResponse<egui::Response> {
    lines_ui(
        ui,
        title,
        &[(Color32::from_rgb(255, 150, 60), title, points)],
        fixed,
        size,
    )
}

/// Several runs' (step, value) series in one plot, each named in the legend
/// (when there are several) with its latest value in the title; `range` fixes
/// the y axis (else it fits the data, at least 5% of its size tall).
pub fn lines_ui(
    ui: &mut egui::Ui,
    title: &str,
    series: &[NamedSeries<'_>],
    range: Option<(f64, f64)>,
    size: Vec2,
) -> egui::InnerResponse<egui::Response> {
    ui.vertical(|ui| {
        let latest: Vec<String> = series
            .iter()
            .filter_map(|(_, _, s)| s.last().map(|(_, v)| format!("{v:.3}")))
            .collect();
        let heading = match latest.as_slice() {
            [] => title.to_string(),
            values => format!("{title}: {}", values.join(" / ")),
        };
        let title_response = title_ui(ui, &heading);
        let size = Vec2::new(size.x, (size.y - 18.0).max(40.0));
        let mut chart = plot(title, "step", "", size).label_formatter(step_readout);
        if series.len() > 1 {
            chart = chart.legend(Legend::default().position(Corner::LeftTop));
        }
        let (lo, hi) = range.unwrap_or_else(|| {
            let (lo, hi) = series
                .iter()
                .flat_map(|(_, _, s)| s.iter().map(|p| p.1))
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                });
            at_least(lo, hi, 0.05 * lo.abs().max(hi.abs()).max(0.2))
        });
        // no value yet: an empty 0..1 frame rather than egui_plot's default
        let (lo, hi) = if lo.is_finite() && hi.is_finite() {
            (lo, hi)
        } else {
            (0.0, 1.0)
        };
        let last_step = series
            .iter()
            .filter_map(|(_, _, s)| s.last().map(|p| p.0))
            .max()
            .unwrap_or(0)
            .max(1);
        chart = chart
            .include_y(lo)
            .include_y(hi)
            .include_x(0.0)
            .include_x(last_step as f64);
        let most = (size.x as usize).max(100);
        chart.show(ui, |plot_ui| {
            for (colour, name, points) in series {
                plot_ui.line(Line::new(*name, series_points(points, most)).color(*colour));
            }
        });
        title_response
    })
}

/// The reference histogram as grey bars and each flow's as a coloured line,
/// on a shared M/V axis symmetric about 0 (so the two modes sit where they
/// should), with a legend.
pub fn histogram_ui(
    ui: &mut egui::Ui,
    reference: &[(f64, f64)],
    flows: &[NamedHistogram<'_>],
    size: Vec2,
) -> egui::InnerResponse<egui::Response> {
    ui.vertical(|ui| {
        let title = title_ui(
            ui,
            "magnetization M/V: HMC (grey bars, both signs) and raw flow samples (lines)",
        );
        let size = Vec2::new(size.x, (size.y - 18.0).max(60.0));
        let reach = reference
            .iter()
            .chain(flows.iter().flat_map(|(_, _, h)| h.iter()))
            .filter(|(x, d)| x.is_finite() && d.is_finite())
            .fold(0.0f64, |r, &(x, _)| r.max(x.abs()))
            * 1.05;
        let mut chart = plot("magnetization", "M/V", "density", size)
            .legend(Legend::default().position(Corner::RightTop))
            .label_formatter(|pos| match pos {
                HoverPosition::NearDataPoint {
                    plot_name,
                    position,
                    ..
                } => Some(format!(
                    "{plot_name}\nM/V {:.3}: density {:.3}",
                    position.x, position.y
                )),
                HoverPosition::Elsewhere { .. } => None,
            })
            .include_y(0.0);
        if reach > 0.0 {
            chart = chart.include_x(-reach).include_x(reach);
        }
        chart.show(ui, |plot_ui| {
            if reference.len() >= 2 {
                let width = reference[1].0 - reference[0].0;
                let bars = reference
                    .iter()
                    .map(|&(x, d)| Bar::new(x, d).width(width))
                    .collect();
                plot_ui.bar_chart(
                    BarChart::new("HMC", bars).color(Color32::from_gray(150).gamma_multiply(0.6)),
                );
            }
            for (colour, name, h) in flows {
                let points: PlotPoints<'_> = h
                    .iter()
                    .filter(|(x, d)| x.is_finite() && d.is_finite())
                    .map(|&(x, d)| [x, d])
                    .collect();
                plot_ui.line(Line::new(*name, points).color(*colour).width(2.0));
            }
        });
        title
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(lo: f64, hi: f64, base: f64) -> Vec<(f64, f64)> {
        let input = GridInput {
            bounds: (lo, hi),
            base_step_size: base,
        };
        nice_grid(input)
            .into_iter()
            .map(|m| (m.value, m.step_size))
            .collect()
    }

    #[test]
    fn the_grid_steps_are_one_two_five_times_powers_of_ten() {
        let m = marks(3.25, 3.95, 0.013);
        let mut sizes: Vec<f64> = m.iter().map(|&(_, s)| s).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
        assert_eq!(sizes.len(), 3, "{sizes:?}");
        for (s, want) in sizes.iter().zip([0.02, 0.1, 0.5]) {
            assert!((s - want).abs() < 1e-12, "{sizes:?}");
        }
        // every value once, inside the bounds, with its largest step
        for w in m.windows(2) {
            assert!((w[0].0 - w[1].0).abs() > 1e-9);
        }
        assert!(m.iter().all(|&(v, _)| (3.25..=3.95).contains(&v)));
        let at = |x: f64| {
            m.iter()
                .find(|&&(v, _)| (v - x).abs() < 1e-9)
                .map(|&(_, s)| s)
        };
        assert_eq!(at(3.5), Some(0.5));
        assert_eq!(at(3.3), Some(0.1));
        assert_eq!(at(3.26), Some(0.02));
    }

    #[test]
    fn ticks_carry_the_decimals_their_step_needs() {
        let label = |value, step_size| tick_label(GridMark { value, step_size }, &(0.0..=1.0));
        assert_eq!(label(0.5, 0.5), "0.5");
        assert_eq!(label(-0.2, 0.2), "-0.2");
        assert_eq!(label(3.35, 0.05), "3.35");
        assert_eq!(label(150.0, 50.0), "150");
        assert_eq!(label(-0.0001, 0.5), "0.0");
        assert_eq!(label(-1e-17, 1.0), "0");
    }

    #[test]
    fn a_degenerate_axis_has_no_grid() {
        assert!(marks(0.0, 1.0, 0.0).is_empty());
        assert!(marks(0.0, 1.0, f64::NAN).is_empty());
    }
}
