//! The lab's "Layer by layer" window: a run's flow cut after its first k
//! layers (or, for a radial flow, the first k maps of its radius map), from
//! the latent normal field (k = 0) to the model (k = N): a few fields (the
//! same latent fields for every k) and the histogram of the magnetization
//! M/V of many, beside HMC's. "Morph" plays k from 0 to N. A training run's
//! model is taken anew at most every [`FOLLOW_EVERY`], a paused one at once.

use super::Phi4Lab;
use super::views::field_ui;
use crate::app::widgets::plots::histogram_ui;
use crate::app::widgets::scrubber::Scrubber;
use crate::flow::FlowModel;
use crate::phi4::observables::BINS;
use crate::rng::Rng;
use crate::stats::histogram;
use eframe::egui::{self, RichText, Vec2};
use web_time::{Duration, Instant};

/// How often the window takes a training run's model anew.
const FOLLOW_EVERY: Duration = Duration::from_millis(1500);
/// Fields pushed through the first k layers for the histogram.
const SAMPLES: usize = 1024;
/// Fields shown.
const SHOWN: usize = 4;
/// The seed of the latent fields (the same for every k).
const SAMPLES_SEED: u64 = 11;

/// What the window shows at one k.
pub struct LayerView {
    /// the first few fields, each L x L
    pub fields: Vec<Vec<f64>>,
    /// the histogram of M/V over all of them
    pub histogram: Vec<(f64, f64)>,
}

/// The window's state.
#[derive(Default)]
pub struct LabLayers {
    pub scrubber: Scrubber,
    /// which run it shows
    pub run: usize,
    /// the model shown, with its step, and when it was taken
    model: Option<(usize, FlowModel<f64>)>,
    taken: Option<Instant>,
    /// views by k (computed as they are asked for)
    views: Vec<Option<LayerView>>,
}

impl LabLayers {
    /// The view at the current k, once computed.
    pub fn view(&self) -> Option<&LayerView> {
        self.views.get(self.scrubber.k).and_then(Option::as_ref)
    }

    fn take(&mut self, model: (usize, FlowModel<f64>)) {
        let n = model.1.n_maps();
        self.scrubber.set_n(n);
        self.model = Some(model);
        self.taken = Some(Instant::now());
        self.views = (0..=n).map(|_| None).collect();
    }

    /// Computes the view at k if it is missing (one a frame).
    fn ensure_view(&mut self) {
        let k = self.scrubber.k;
        let (Some((_, model)), None) = (&self.model, self.view()) else {
            return;
        };
        let flow = model.as_flow();
        let v = flow.dim();
        let size = (v as f64).sqrt().round() as usize;
        let mut rng = Rng::seeded(SAMPLES_SEED);
        let z: Vec<f64> = (0..SAMPLES * v).map(|_| rng.normal()).collect();
        let fields = match model.prefix(k) {
            Some(cut) => {
                let mut x = vec![0.0; z.len()];
                let mut log_det = vec![0.0; SAMPLES];
                cut.as_flow().x_from_z(&z, &mut x, &mut log_det);
                x
            }
            None => z,
        };
        let m: Vec<f64> = fields
            .chunks(v)
            .map(|f| f.iter().sum::<f64>() / v as f64)
            .collect();
        let view = LayerView {
            fields: fields
                .chunks(v)
                .take(SHOWN)
                .map(|f| f[..size * size].to_vec())
                .collect(),
            histogram: histogram(&m, BINS),
        };
        if let Some(slot) = self.views.get_mut(k) {
            *slot = Some(view);
        }
    }

    /// What the first k maps are, in words.
    fn caption(&self) -> String {
        let n = self.scrubber.n();
        let what = match &self.model {
            Some((_, FlowModel::Radial(_))) => "maps of the radius map",
            _ => "coupling layers",
        };
        match self.scrubber.k {
            0 => format!("k = 0: the latent field, N(0, I) at every site, before the {n} {what}."),
            k if k == n => format!("k = {n}: all {n} {what}: the model's own samples."),
            k => format!("k = {k}: after the first {k} of {n} {what}."),
        }
    }
}

impl Phi4Lab {
    /// Opens the "Layer by layer" window on the first run.
    pub fn open_layers(&mut self) {
        self.layers.get_or_insert_with(LabLayers::default);
    }

    /// The "Layer by layer" window, while it is open.
    pub fn layers(&self) -> Option<&LabLayers> {
        self.layers.as_ref()
    }

    /// The window, when open: which run, the slider, "Morph", the fields and
    /// the histogram at k.
    pub(super) fn layers_ui(&mut self, ctx: &egui::Context) {
        let Some(layers) = &mut self.layers else {
            return;
        };
        layers.run = layers.run.min(self.runs.len().saturating_sub(1));
        if let Some(run) = self.runs.get(layers.run) {
            let step = run.steps();
            let stale = layers.model.as_ref().is_none_or(|(s, _)| *s != step);
            let due = !self.running || layers.taken.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY);
            if stale
                && due
                && !layers.scrubber.morphing()
                && let Some(model) = run.host.model().or_else(|| run.host.checkpoint().cloned())
            {
                layers.take(model);
            }
        }
        layers.scrubber.advance();
        layers.ensure_view();
        if layers.scrubber.morphing() || layers.view().is_none() {
            ctx.request_repaint();
        }
        let hmc = self
            .reference
            .as_ref()
            .map_or(Vec::new(), |r| r.observables.histogram.clone());
        let labels: Vec<String> = self.runs.iter().map(|r| r.label.clone()).collect();
        let colour = self.runs.get(layers.run).map(|r| r.colour);
        let label = format!(
            "after {} of {} maps",
            layers.scrubber.k,
            layers.scrubber.n()
        );
        let mut open = true;
        let mut chosen = layers.run;
        // at the right, clear of the controls and the runs' fields
        let right = ctx.content_rect().right_top() + egui::vec2(-450.0, 60.0);
        egui::Window::new("Layer by layer")
            .open(&mut open)
            .default_pos(right)
            .default_width(420.0)
            .show(ctx, |ui| {
                if labels.len() > 1 {
                    ui.horizontal(|ui| {
                        ui.label("run");
                        for (k, label) in labels.iter().enumerate() {
                            ui.selectable_value(&mut chosen, k, label);
                        }
                    });
                }
                if layers.model.is_none() {
                    ui.label("No model yet: on the GPU the window shows the last checkpoint.");
                    return;
                }
                layers.scrubber.ui(ui);
                ui.label(RichText::new(layers.caption()).strong());
                let Some(view) = layers.view() else {
                    ui.label("computing...");
                    return;
                };
                let size = (view.fields.first().map_or(0, Vec::len) as f64).sqrt() as usize;
                ui.horizontal(|ui| {
                    for field in &view.fields {
                        field_ui(ui, field, size, 72.0);
                    }
                })
                .response
                .on_hover_text("The same latent fields pushed through the first k maps.");
                let flows = [(
                    colour.unwrap_or(egui::Color32::WHITE),
                    label.as_str(),
                    &view.histogram[..],
                )];
                histogram_ui(ui, &hmc, &flows, Vec2::new(400.0, 240.0))
                    .inner
                    .on_hover_text(
                        "Magnetization M/V of 1024 fields after k maps (line) and HMC's reference \
                     (grey bars): watch one peak become two, or not.",
                    );
            });
        if chosen != layers.run {
            layers.run = chosen;
            layers.model = None;
        }
        if !open {
            self.layers = None;
        }
    }
}
