//! The bijection explorer: one scalar map with its parameters on sliders (the
//! constrained values, with the raw ones the optimizer sees), plotted as f,
//! its inverse, f(x) - x and log f'; and for a radial run, its learned radius
//! map r -> f(r), one curve per direction for the angle-dependent flow, with a
//! direct flow's parameters editable by hand while paused.

use super::Playground;
use super::session::Status;
use crate::app::widgets::plots::{at_least, nice_grid, tick_label};
use crate::bijection::{Family, ParamSpec, Scalar};
use crate::flow::{FlowModel, RadialConditioner, RadialFlow};
use eframe::egui::{self, Color32};
use egui_plot::{HoverPosition, Line, LineStyle, Plot, PlotPoints};

/// The families the explorer offers (the spline is described by its knots,
/// not by named parameters).
const FAMILIES: [Family; 4] = [
    Family::CubicRational,
    Family::Sinh,
    Family::Cubic,
    Family::Affine,
];

/// The inputs the plots cover.
const SPAN: f64 = 4.0;

/// The explorer's state: the map on the sliders.
pub struct Explorer {
    family: Family,
    /// constrained parameter values, in the family's order
    values: Vec<f64>,
}

impl Default for Explorer {
    fn default() -> Self {
        let mut explorer = Self {
            family: Family::CubicRational,
            values: Vec::new(),
        };
        explorer.pick(Family::CubicRational);
        explorer
    }
}

impl Explorer {
    /// The family on the sliders.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The explorer on `family`'s identity map (a lesson's start).
    pub fn for_family(family: Family) -> Self {
        let mut explorer = Self::default();
        explorer.pick(family);
        explorer
    }
}

/// A slider range inside a parameter's constraint: the open interval itself
/// where it is short, else a window around the identity's values.
pub fn slider_range(spec: &ParamSpec) -> (f64, f64) {
    let lo = if spec.low.is_finite() { spec.low } else { -3.0 };
    let hi = if spec.high.is_finite() {
        spec.high
    } else {
        lo.max(0.0) + 4.0
    };
    let (lo, hi) = if hi - lo > 20.0 {
        (lo.max(-5.0), hi.min(5.0))
    } else {
        (lo, hi)
    };
    // strictly inside an open constraint
    let pad = if spec.low.is_finite() || spec.high.is_finite() {
        1e-3 * (hi - lo)
    } else {
        0.0
    };
    (lo + pad, hi - pad)
}

/// Constrained values of the identity map of `family` (raw all zero).
fn identity_values(family: Family) -> Vec<f64> {
    Scalar::<f64>::from_raw(family, &vec![0.0; family.n_raw()]).constrained()
}

/// f, f^-1, f(x) - x and log f' of one map on a grid over [-SPAN, SPAN].
pub struct Curves {
    pub x: Vec<f64>,
    pub f: Vec<f64>,
    pub inverse: Vec<f64>,
    pub shift: Vec<f64>,
    pub log_slope: Vec<f64>,
}

/// The curves of `map` at `n` points.
pub fn curves(map: &Scalar<f64>, n: usize) -> Curves {
    let x: Vec<f64> = (0..n)
        .map(|i| -SPAN + 2.0 * SPAN * i as f64 / (n - 1) as f64)
        .collect();
    let (f, log_slope): (Vec<f64>, Vec<f64>) = x.iter().map(|&v| map.x_from_z(v)).unzip();
    let inverse = x.iter().map(|&v| map.z_from_x_slope(v).0).collect();
    let shift = x.iter().zip(&f).map(|(a, b)| b - a).collect();
    Curves {
        x,
        f,
        inverse,
        shift,
        log_slope,
    }
}

impl Explorer {
    fn pick(&mut self, family: Family) {
        self.family = family;
        self.values = identity_values(family);
    }

    /// The map the sliders describe.
    fn map(&self) -> Result<Scalar<f64>, String> {
        let raw = self.family.raw_from_constrained(&self.values)?;
        Ok(Scalar::from_raw(self.family, &raw))
    }

    /// The single-map explorer.
    pub fn map_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            for family in FAMILIES {
                if ui
                    .selectable_label(self.family == family, family.name())
                    .clicked()
                {
                    self.pick(family);
                }
            }
        });
        let raw = self
            .family
            .raw_from_constrained(&self.values)
            .unwrap_or_default();
        for (i, spec) in self.family.params().iter().enumerate() {
            let (lo, hi) = slider_range(spec);
            ui.horizontal(|ui| {
                ui.add(egui::Slider::new(&mut self.values[i], lo..=hi).text(spec.name))
                    .on_hover_text(format!(
                        "constraint: {}; the optimizer moves the raw value, which the constraint's transform maps here",
                        spec.constraint
                    ));
                let raw = raw.get(i).copied().unwrap_or(f64::NAN);
                ui.label(
                    egui::RichText::new(format!("raw {raw:+.3} | {}", spec.constraint)).small(),
                );
            });
        }
        if ui.button("identity").clicked() {
            self.values = identity_values(self.family);
        }
        match self.map() {
            Ok(map) => {
                let c = curves(&map, 161);
                ui.horizontal_wrapped(|ui| {
                    plot(ui, "f(x)", &c.x, &c.f, true);
                    plot(ui, "inverse f^-1(x)", &c.x, &c.inverse, true);
                    plot(ui, "f(x) - x", &c.x, &c.shift, false);
                    plot(ui, "log f'(x)", &c.x, &c.log_slope, false);
                });
            }
            Err(e) => {
                ui.colored_label(ui.visuals().warn_fg_color, e);
            }
        }
    }
}

/// The radius map of a radial run, and (direct flows, paused) its parameters
/// on sliders. Returns an edited model for the run to take.
pub fn radial_ui(
    ui: &mut egui::Ui,
    model: &FlowModel<f64>,
    editable: bool,
) -> Option<FlowModel<f64>> {
    let FlowModel::Radial(flow) = model else {
        ui.label("The radius map belongs to radial flows; this run trains a coupling flow.");
        return None;
    };
    let radii: Vec<f64> = (0..=80).map(|i| 4.0 * i as f64 / 80.0).collect();
    let angles: Vec<f64> = match flow.spec.conditioner {
        RadialConditioner::Direct => vec![0.0],
        RadialConditioner::Fourier { .. } => (0..12)
            .map(|k| std::f64::consts::TAU * k as f64 / 12.0)
            .collect(),
    };
    let maps: Vec<Vec<f64>> = angles.iter().map(|&a| flow.radius_map(a, &radii)).collect();
    radius_plot(ui, &radii, &maps);
    if angles.len() > 1 {
        ui.label("One curve per direction (12 angles, coloured round the circle).");
    }
    if flow.spec.conditioner != RadialConditioner::Direct {
        return None;
    }
    if !editable {
        ui.label("Pause training to edit this direct radial flow's parameters by hand.");
        return None;
    }
    edit_direct(ui, flow)
}

/// Sliders over a direct radial flow's centre, log-scales and every layer's
/// constrained parameters; the edited flow when one moved.
fn edit_direct(ui: &mut egui::Ui, flow: &RadialFlow<f64>) -> Option<FlowModel<f64>> {
    use crate::flow::Flow as _;
    let mut params = flow.params().to_vec();
    let mut changed = false;
    let d = flow.spec.dim;
    ui.label(
        "Move a parameter: the density and the grid follow; press play to train on from here.",
    );
    for (i, name) in ["centre x", "centre y"].iter().enumerate().take(d) {
        changed |= ui
            .add(egui::Slider::new(&mut params[i], -3.0..=3.0).text(*name))
            .changed();
    }
    for (i, name) in ["log-scale x", "log-scale y"].iter().enumerate().take(d) {
        changed |= ui
            .add(egui::Slider::new(&mut params[d + i], -2.0..=2.0).text(*name))
            .changed();
    }
    egui::ScrollArea::vertical()
        .max_height(220.0)
        .show(ui, |ui| {
            let mut at = 2 * d;
            for (k, &family) in flow.spec.stack.layers().iter().enumerate() {
                let n = family.n_raw();
                let raw = &params[at..at + n];
                let mut values = Scalar::from_raw(family, raw).constrained();
                if !values.is_empty() {
                    ui.label(format!("layer {} ({})", k + 1, family.name()));
                    let mut moved = false;
                    for (v, spec) in values.iter_mut().zip(family.params()) {
                        let (lo, hi) = slider_range(spec);
                        moved |= ui
                            .add(egui::Slider::new(v, lo..=hi).text(spec.name))
                            .on_hover_text(format!("constraint: {}", spec.constraint))
                            .changed();
                    }
                    if moved && let Ok(new_raw) = family.raw_from_constrained(&values) {
                        params[at..at + n].copy_from_slice(&new_raw);
                        changed = true;
                    }
                }
                at += n;
            }
        });
    if !changed {
        return None;
    }
    RadialFlow::from_params(flow.spec.clone(), params)
        .ok()
        .map(FlowModel::Radial)
}

/// A small line plot of `y` over `x` with its axes, the identity dashed when
/// asked, and the value under the pointer.
fn plot(ui: &mut egui::Ui, title: &str, x: &[f64], y: &[f64], identity: bool) {
    ui.vertical(|ui| {
        ui.label(egui::RichText::new(title).small().strong());
        let curve: PlotPoints<'_> = x
            .iter()
            .zip(y)
            .filter(|(_, v)| v.is_finite())
            .map(|(&a, &b)| [a, b])
            .collect();
        let weak = ui.visuals().weak_text_color();
        // at least a span of 1 tall, so the identity's zero shift is a flat
        // line rather than its rounding noise blown up
        let (lo, hi) = y
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = if lo.is_finite() {
            at_least(lo, hi, 1.0)
        } else {
            (-1.0, 1.0)
        };
        Plot::new(title)
            .width(170.0)
            .height(130.0)
            .include_y(lo)
            .include_y(hi)
            .x_grid_spacer(nice_grid)
            .y_grid_spacer(nice_grid)
            .x_axis_formatter(tick_label)
            .y_axis_formatter(tick_label)
            .x_axis_label(egui::RichText::new("x").small())
            .allow_scroll(false)
            .show_crosshair(false)
            .label_formatter(|pos| match pos {
                HoverPosition::NearDataPoint {
                    plot_name,
                    position,
                    ..
                } => Some(format!(
                    "{plot_name}\nx {:.3}: {:.4}",
                    position.x, position.y
                )),
                HoverPosition::Elsewhere { .. } => None,
            })
            .show(ui, |plot_ui| {
                if identity {
                    plot_ui.line(
                        Line::new("identity", vec![[-SPAN, -SPAN], [SPAN, SPAN]])
                            .color(weak)
                            .style(LineStyle::dashed_loose()),
                    );
                }
                plot_ui.line(Line::new(title, curve).color(Color32::from_rgb(120, 160, 255)));
            });
    });
}

/// The radius maps r -> f(r) - f(0), one curve per direction, over the
/// identity, with axes and the value under the pointer.
fn radius_plot(ui: &mut egui::Ui, radii: &[f64], maps: &[Vec<f64>]) {
    ui.label(egui::RichText::new("radius map r -> f(r) (latent radius to data radius)").small());
    let r_max = radii.last().copied().unwrap_or(1.0);
    let directions = maps.len();
    let weak = ui.visuals().weak_text_color();
    Plot::new("radius map")
        .width(360.0)
        .height(200.0)
        .x_grid_spacer(nice_grid)
        .y_grid_spacer(nice_grid)
        .x_axis_formatter(tick_label)
        .y_axis_formatter(tick_label)
        .x_axis_label(egui::RichText::new("latent radius r").small())
        .y_axis_label(egui::RichText::new("data radius f(r)").small())
        .allow_scroll(false)
        .show_crosshair(false)
        .label_formatter(|pos| match pos {
            HoverPosition::NearDataPoint {
                plot_name,
                position,
                ..
            } => Some(format!(
                "{plot_name}\nr {:.3} -> {:.3}",
                position.x, position.y
            )),
            HoverPosition::Elsewhere { .. } => None,
        })
        .show(ui, |plot_ui| {
            plot_ui.line(
                Line::new("identity", vec![[0.0, 0.0], [r_max, r_max]])
                    .color(weak)
                    .style(LineStyle::dashed_loose()),
            );
            for (k, map) in maps.iter().enumerate() {
                let colour = if directions == 1 {
                    Color32::from_rgb(120, 160, 255)
                } else {
                    let hue = k as f32 / directions as f32;
                    egui::ecolor::Hsva::new(hue, 0.7, 0.95, 1.0).into()
                };
                let name = if directions == 1 {
                    "f(r)".to_string()
                } else {
                    format!("angle {:.0} deg", 360.0 * k as f64 / directions as f64)
                };
                let points: PlotPoints<'_> = radii
                    .iter()
                    .zip(map)
                    .filter(|(_, f)| f.is_finite())
                    .map(|(&r, &f)| [r, f])
                    .collect();
                plot_ui.line(Line::new(name, points).color(colour));
            }
        });
}

impl Playground {
    /// The bijection explorer window, while open, inside `area`.
    pub(super) fn explorer_ui(&mut self, ctx: &egui::Context, area: egui::Rect) {
        let Some(explorer) = &mut self.windows.explorer else {
            return;
        };
        let mut open = true;
        let mut edited = None;
        let paused = self
            .session
            .as_ref()
            .is_some_and(|s| s.status != Status::Running);
        if !paused {
            self.windows.hand_model = None;
        }
        let model = self.windows.hand_model.clone().or_else(|| {
            self.session
                .as_ref()
                .and_then(|s| s.model())
                .map(|(_, m)| m)
        });
        egui::Window::new("Bijection explorer")
            .constrain_to(area)
            .open(&mut open)
            .default_pos(self.views.window_pos("target"))
            .default_height(720.0)
            .vscroll(true)
            .show(ctx, |ui| {
                egui::CollapsingHeader::new("one scalar map")
                    .default_open(true)
                    .show(ui, |ui| explorer.map_ui(ui));
                egui::CollapsingHeader::new("this run's radial flow")
                    .default_open(true)
                    .show(ui, |ui| match &model {
                        Some(model) => edited = radial_ui(ui, model, paused),
                        None => {
                            ui.label("The model is on its way from the GPU.");
                        }
                    });
            });
        if !open {
            self.windows.explorer = None;
        }
        if let (Some(model), Some(session)) = (edited, &mut self.session) {
            match session.set_model(&model) {
                Ok(()) => self.windows.hand_model = Some(model),
                Err(e) => self.message = Some(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slider_range_lies_inside_its_constraint() {
        for family in FAMILIES {
            for spec in family.params() {
                let (lo, hi) = slider_range(spec);
                assert!(lo < hi, "{}", spec.name);
                assert!(
                    spec.admits(lo) && spec.admits(hi),
                    "{} {lo} {hi}",
                    spec.name
                );
            }
            // the identity's values are on the sliders
            for (v, spec) in identity_values(family).iter().zip(family.params()) {
                let (lo, hi) = slider_range(spec);
                assert!((lo..=hi).contains(v), "{} = {v}", spec.name);
            }
        }
    }

    #[test]
    fn the_curves_are_consistent_with_each_other() {
        for family in FAMILIES {
            let mut values = identity_values(family);
            // move every parameter a little off the identity
            for (v, spec) in values.iter_mut().zip(family.params()) {
                let (lo, hi) = slider_range(spec);
                *v = (*v + 0.3).clamp(lo, hi);
            }
            let raw = family.raw_from_constrained(&values).unwrap();
            let map = Scalar::from_raw(family, &raw);
            let c = curves(&map, 41);
            for i in 0..c.x.len() {
                assert!((c.shift[i] - (c.f[i] - c.x[i])).abs() < 1e-12);
                // the inverse undoes f
                let back = map.x_from_z(c.inverse[i]).0;
                assert!((back - c.x[i]).abs() < 1e-9, "{family:?} at {}", c.x[i]);
                // log f' matches a finite difference of f
                if i > 0 && i + 1 < c.x.len() {
                    let h = c.x[i + 1] - c.x[i - 1];
                    let slope = (c.f[i + 1] - c.f[i - 1]) / h;
                    assert!(
                        (slope.ln() - c.log_slope[i]).abs() < 0.05,
                        "{family:?} at {}",
                        c.x[i]
                    );
                }
            }
        }
    }
}
