//! The playground's bottom panel: the loss curve, and beside it the metrics
//! the target allows (held-out NLL, grid KL, reverse KL and ESS/N).

use super::Playground;
use super::session::{Metrics, Session, Status};
use crate::app::widgets::plots::{LossPlot, loss_ui, series_ui};
use crate::target::TargetKind;
use crate::train::Loss;
use eframe::egui::{self, Vec2};

/// A metric's (step, value) points.
type Series = Vec<(usize, f64)>;

/// One metric beside the loss: its title, points and what it means.
struct SidePlot {
    title: &'static str,
    points: Series,
    /// fixed axes, where the metric has a natural range
    fixed: Option<(f64, f64)>,
    hover: &'static str,
}

/// The (step, value) points of one metric over the run.
fn series(session: &Session, pick: fn(&Metrics) -> Option<f64>) -> Series {
    session
        .metrics
        .iter()
        .filter_map(|m| pick(m).map(|v| (m.step, v)))
        .collect()
}

/// The metrics the session's target allows, in the order they are shown.
fn side_plots(session: &Session) -> Vec<SidePlot> {
    let mut side = Vec::new();
    if session.loss() == Loss::ReverseKl {
        side.push(SidePlot {
            title: "ESS/N",
            points: series(session, |m| m.ess),
            fixed: Some((0.0, 1.0)),
            hover: "Effective sample size of the flow's importance weights against the target, over N: 1 is perfect.",
        });
        side.push(SidePlot {
            title: "reverse KL",
            points: series(session, |m| m.reverse_kl),
            fixed: None,
            hover: "KL(q || p) from 500 flow samples (with log Z estimated where it is not known).",
        });
    }
    let grid = series(session, |m| m.grid_kl);
    if !grid.is_empty() {
        side.push(SidePlot {
            title: "grid KL",
            points: grid,
            fixed: None,
            hover: "KL(target || model) on the view's grid: how far the heatmap is from the target's density.",
        });
    }
    let held_out = series(session, |m| m.held_out_nll);
    if !held_out.is_empty() {
        side.push(SidePlot {
            title: "held-out NLL",
            points: held_out,
            fixed: None,
            hover: "Mean -log q of 500 target samples never trained on; rising while the loss falls means overfitting.",
        });
    }
    side
}

/// What the loss axis measures.
fn loss_label(session: &Session) -> &'static str {
    if session.target.kind() == TargetKind::Energy {
        "reverse KL loss, KL - log Z (nats)"
    } else if session.loss() == Loss::ReverseKl {
        "reverse KL, mean of log q - log p over model samples (nats)"
    } else {
        "-log q of training batches (nats); orange: held-out samples"
    }
}

impl Playground {
    /// The loss curve (with the previous run's in grey), and beside it (below
    /// it on a narrow screen) the metrics the target allows.
    pub(super) fn curves_ui(&mut self, ui: &mut egui::Ui) {
        let Some(session) = &self.session else {
            return;
        };
        let side = side_plots(session);
        // the held-out NLL shares the forward KL's units, not the reverse's
        let overlay = match session.loss() {
            Loss::ForwardKl => series(session, |m| m.held_out_nll),
            Loss::ReverseKl => Vec::new(),
        };
        let hint = match session.status {
            Status::Running => "training...",
            _ => "press play to train",
        };
        let plot = LossPlot {
            overlay: &overlay,
            ghost: self
                .previous
                .as_ref()
                .map(|p| (p.losses.as_slice(), p.label.as_str())),
            label: loss_label(session),
            hint,
        };
        let hover = "The training loss at every step (thin) and its running mean (thick); grey: the run before this one.";
        let loss_rect;
        if self.narrow {
            let width = ui.available_width();
            let drawn = loss_ui(ui, &session.losses, &plot, Vec2::new(width, 150.0));
            loss_rect = drawn.response.rect;
            drawn.inner.on_hover_text(hover);
            let size = Vec2::new(0.5 * width - 6.0, 90.0);
            for pair in side.chunks(2) {
                ui.horizontal(|ui| {
                    for p in pair {
                        series_ui(ui, p.title, &p.points, p.fixed, size)
                            .inner
                            .on_hover_text(p.hover);
                    }
                });
            }
        } else {
            // up to two metrics in a column, more in two columns
            let columns = if side.len() > 2 { 2 } else { 1 };
            let side_width = match side.len() {
                0 => 0.0,
                _ => 250.0 * columns as f32,
            };
            let width = ui.available_width() - side_width - 8.0;
            let mut rect = None;
            ui.horizontal(|ui| {
                let drawn = loss_ui(ui, &session.losses, &plot, Vec2::new(width, 150.0));
                rect = Some(drawn.response.rect);
                drawn.inner.on_hover_text(hover);
                let rows = side.len().div_ceil(columns);
                for column in side.chunks(rows.max(1)) {
                    ui.vertical(|ui| {
                        let height = 150.0 / rows as f32 - 4.0;
                        for p in column {
                            series_ui(ui, p.title, &p.points, p.fixed, Vec2::new(244.0, height))
                                .inner
                                .on_hover_text(p.hover);
                        }
                    });
                }
            });
            loss_rect = rect.unwrap_or(egui::Rect::NOTHING);
        }
        self.views.rects.push(("loss", loss_rect));
    }
}
