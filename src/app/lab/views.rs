//! The lab's central and bottom panels: the HMC reference, each run's field
//! configurations and numbers, the magnetization histogram, and the curves
//! of loss, ESS/N, IMH acceptance and the M > 0 fraction over training.

use super::run::LabRun;
use super::{Phi4Lab, hmc_trajectories};
use crate::app::widgets::colour::field_colour;
use crate::app::widgets::plots::{NamedHistogram, NamedSeries, histogram_ui, lines_ui};
use crate::target::phi4::Phi4;
use eframe::egui::{self, Rect, Sense, Stroke, Vec2};

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

impl Phi4Lab {
    /// The central panel: the reference, each run, and the histogram.
    pub(super) fn views_ui(&mut self, ui: &mut egui::Ui) {
        let Some(model) = self.model else {
            return;
        };
        ui.label(self.reference_line(&model));
        ui.horizontal_top(|ui| {
            ui.vertical(|ui| {
                for run in &self.runs {
                    run_ui(ui, run, model.size);
                    ui.add_space(6.0);
                }
            });
            let flows: Vec<NamedHistogram<'_>> = self
                .runs
                .iter()
                .filter_map(|r| {
                    r.estimates
                        .as_ref()
                        .map(|e| (r.colour, r.label.as_str(), &e.flow_histogram[..]))
                })
                .collect();
            let hmc = self
                .reference
                .as_ref()
                .map_or(&[][..], |r| &r.observables.histogram[..]);
            let side = (ui.available_width() - 8.0).clamp(200.0, 520.0);
            histogram_ui(ui, hmc, &flows, Vec2::new(side, side * 0.7))
                .inner
                .on_hover_text(
                    "Magnetization M/V: HMC's reference (grey bars) and each flow's raw samples \
                 (lines, before any correction). A flow that covers one peak only has collapsed.",
                );
        });
    }

    /// The theory and its HMC reference, in a line.
    fn reference_line(&self, model: &Phi4) -> String {
        let c = model.couplings;
        let reference = match &self.reference {
            Some(r) => format!(
                "<|M|>/V = {:.3} +- {:.3}, <M^2>/V = {:.3} +- {:.3} ({} trajectories)",
                r.observables.abs_m.mean,
                r.observables.abs_m.error,
                r.observables.m2.mean,
                r.observables.m2.error,
                hmc_trajectories(model.volume())
            ),
            None => "unavailable".into(),
        };
        format!(
            "L = {}, m^2 = {}, lambda = {}: HMC reference {reference}",
            model.size, c.m2, c.lambda
        )
    }

    /// The bottom panel: loss, ESS/N, acceptance and M > 0 fraction over steps.
    pub(super) fn curves_ui(&mut self, ui: &mut egui::Ui) {
        let pick = |f: fn(&LabRun) -> &Vec<(usize, f64)>| -> Vec<NamedSeries<'_>> {
            self.runs
                .iter()
                .map(|r| (r.colour, r.label.as_str(), &f(r)[..]))
                .collect()
        };
        let width = ((ui.available_width() - 24.0) / 4.0).max(120.0);
        let size = Vec2::new(width, 130.0);
        ui.horizontal(|ui| {
            lines_ui(
                ui,
                "reverse KL loss (nats)",
                &pick(|r| &r.losses),
                None,
                size,
            )
            .inner
            .on_hover_text("mean(log q - log p~) of each batch: KL(q || p) - log Z.");
            lines_ui(ui, "ESS/N", &pick(|r| &r.ess), Some((0.0, 1.0)), size)
                .inner
                .on_hover_text(
                    "Effective sample size of the importance weights over N (256 samples).",
                );
            lines_ui(
                ui,
                "IMH acceptance",
                &pick(|r| &r.acceptance),
                Some((0.0, 1.0)),
                size,
            )
            .inner
            .on_hover_text(
                "Acceptance of independent Metropolis-Hastings with the flow as proposal.",
            );
            lines_ui(
                ui,
                "fraction M > 0",
                &pick(|r| &r.positive),
                Some((0.0, 1.0)),
                size,
            )
            .inner
            .on_hover_text(
                "1/2 for the symmetric target; near 0 or 1 the flow sees one mode only.",
            );
        });
    }
}

/// One run: its label and pace, a few of its fields, and its numbers.
fn run_ui(ui: &mut egui::Ui, run: &LabRun, size: usize) {
    ui.horizontal(|ui| {
        ui.colored_label(run.colour, egui::RichText::new(&run.label).strong());
        ui.label(format!("step {}", run.steps()));
        if let Some(ms) = run.ms_per_step() {
            ui.label(format!("{ms:.1} ms a step"));
        }
    });
    ui.horizontal(|ui| {
        for field in &run.fields {
            field_ui(ui, field, size, 64.0);
        }
    })
    .response
    .on_hover_text(
        "Field configurations the flow samples now: blue phi < 0, white 0, red phi > 0 (full colour at |phi| = 2).",
    );
    if let Some(e) = &run.estimates {
        ui.label(format!(
            "ESS/N {:.3}   IMH acceptance {:.3}   M > 0: {:.2}",
            e.ess, e.acceptance, e.positive_fraction
        ));
        ui.label(format!(
            "<|M|>/V IMH {:.3} +- {:.3}, reweighted {:.3} +- {:.3}",
            e.imh.abs_m.mean, e.imh.abs_m.error, e.reweighted.abs_m.mean, e.reweighted.abs_m.error
        ));
    }
}
