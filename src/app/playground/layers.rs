//! The "Layer by layer" window: the flow cut after its first k maps, from the
//! latent normal (k = 0) to the whole model (k = N). For each k the density is
//! exact (the change of variables through those k maps alone), and the grid
//! and the samples (the same latent points for every k) are pushed through
//! them. "Morph" plays k from 0 to N. The window shows the model the main
//! view draws (so k = N is that very picture), taken anew at most every
//! [`FOLLOW_EVERY`] while training and at once while paused. A run in a
//! worker has its cuts drawn there, as its views are.

use super::Playground;
use super::picture::{Picture, cpu_picture_at, grid_size, latent_picture, latent_samples};
use super::session::{Session, Status};
use super::views::model_ui;
use crate::app::widgets::colour::{image, normalized};
use crate::app::widgets::scrubber::Scrubber;
use crate::flow::FlowModel;
use crate::rng::Rng;
use eframe::egui::{self, RichText};
use web_time::{Duration, Instant};

/// How often the window takes a training run's model anew.
const FOLLOW_EVERY: Duration = Duration::from_millis(1500);
/// The seed of the samples' latent points (the same for every k).
pub const SAMPLES_SEED: u64 = 7;
/// The side of the window's view, in points.
const SIDE: f32 = 300.0;

/// The window's state.
#[derive(Default)]
pub struct LayerScrubber {
    pub scrubber: Scrubber,
    /// the model shown, the picture version of the run it came from, and when it was taken
    model: Option<(usize, FlowModel<f64>)>,
    version: u64,
    taken: Option<Instant>,
    /// pictures of the model cut after k maps, by k (computed as they are asked for)
    pictures: Vec<Option<Picture>>,
    /// their density grid's size: the main view's
    size: usize,
    /// the cut asked of the run's worker and not yet come: the model's
    /// version and k
    asked: Option<(u64, usize)>,
    texture: Option<(usize, egui::TextureHandle)>,
}

impl LayerScrubber {
    /// The picture at the current k, once computed.
    pub fn picture(&self) -> Option<&Picture> {
        self.pictures.get(self.scrubber.k).and_then(Option::as_ref)
    }

    /// Takes `model` (from the run's picture `version`, drawn at `size`) as
    /// the one shown.
    fn take(&mut self, model: (usize, FlowModel<f64>), version: u64, size: usize) {
        let n = model.1.n_maps();
        self.size = if size > 0 { size } else { grid_size(&model.1) };
        self.scrubber.set_n(n);
        self.model = Some(model);
        self.version = version;
        self.taken = Some(Instant::now());
        self.pictures = (0..=n).map(|_| None).collect();
        self.texture = None;
    }

    /// Computes the picture at k if it is missing (one a frame). Where the
    /// run trains in a worker the worker draws the cut (the latent picture,
    /// k = 0, costs nothing and is drawn here), so the page's thread pushes
    /// nothing through the flow.
    fn ensure_picture(&mut self, session: Option<&mut Session>) {
        let Some((step, model)) = &self.model else {
            return;
        };
        let worker = session.filter(|s| s.in_worker());
        let worker = match worker {
            Some(session) => {
                // a cut of this very model, as asked, or one to pass over
                if let Some((maps, picture)) = session.take_cut_picture() {
                    if self.asked == Some((self.version, maps))
                        && let Some(slot) = self.pictures.get_mut(maps)
                    {
                        *slot = Some(picture);
                    }
                    self.asked = None;
                }
                // nothing on its way (a new run after Reset, a worker that
                // failed): ask again
                if !session.drawing_in_worker() {
                    self.asked = None;
                }
                Some(session)
            }
            None => None,
        };
        let k = self.scrubber.k;
        if self.picture().is_some() {
            return;
        }
        let mut rng = Rng::seeded(SAMPLES_SEED);
        let picture = match (model.prefix(k), worker) {
            (Some(_), Some(session)) => {
                // (the latent points only when asking: a cut on its way
                // leaves every frame until it comes with nothing to do)
                if self.asked.is_none()
                    && session.draw_cut_in_worker(model, k, latent_samples(&mut rng), self.size)
                {
                    self.asked = Some((self.version, k));
                }
                return;
            }
            (Some(cut), None) => cpu_picture_at(cut, *step, &mut rng, self.size),
            (None, _) => latent_picture(model, &mut rng, self.size),
        };
        if let Some(slot) = self.pictures.get_mut(k) {
            *slot = Some(picture);
        }
    }

    /// What the first k maps are, in words.
    fn caption(&self) -> String {
        let n = self.scrubber.n();
        let what = match &self.model {
            Some((_, FlowModel::Coupling(_) | FlowModel::Lattice(_))) => "coupling layers",
            _ => "scalar maps of the radius map",
        };
        match self.scrubber.k {
            0 => format!("k = 0: the latent space, N(0, I), before any of the {n} {what}."),
            k if k == n => format!("k = {n}: all {n} {what}: the model itself."),
            k => format!("k = {k}: after the first {k} of {n} {what}."),
        }
    }
}

impl Playground {
    /// Opens the "Layer by layer" window.
    pub fn open_layers(&mut self) {
        self.windows
            .layers
            .get_or_insert_with(LayerScrubber::default);
    }

    /// The "Layer by layer" window, while it is open.
    pub fn layers(&self) -> Option<&LayerScrubber> {
        self.windows.layers.as_ref()
    }

    /// The window, when open: the slider, "Morph", and the view at k.
    pub(super) fn layers_ui(&mut self, ctx: &egui::Context, area: egui::Rect) {
        let Some(layers) = &mut self.windows.layers else {
            return;
        };
        if let Some(session) = &self.session {
            let stale = layers.version != session.picture_version || layers.model.is_none();
            let due = session.status != Status::Running
                || layers.taken.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY);
            // the model the main view draws, so k = N is that very picture
            if stale
                && due
                && !layers.scrubber.morphing()
                && let Some(model) = session.picture.model.clone().or_else(|| session.model())
            {
                layers.take(model, session.picture_version, session.picture.n);
            }
        }
        layers.scrubber.advance();
        layers.ensure_picture(self.session.as_mut());
        if layers.scrubber.morphing() || layers.picture().is_none() {
            ctx.request_repaint();
        }
        let k = layers.scrubber.k;
        let texture = match (&layers.texture, layers.picture()) {
            (Some((at, t)), _) if *at == k => Some(t.clone()),
            (_, Some(picture)) => {
                let values = normalized(&picture.log_q, self.views.scale);
                let t = ctx.load_texture(
                    "layer density",
                    image(&values, picture.n),
                    egui::TextureOptions::LINEAR,
                );
                layers.texture = Some((k, t.clone()));
                Some(t)
            }
            _ => None,
        };
        let overlays = self.views.overlays;
        let mut open = true;
        egui::Window::new("Layer by layer")
            .constrain_to(area)
            .open(&mut open)
            .default_pos(self.views.window_pos("target"))
            .show(ctx, |ui| {
                if layers.model.is_none() {
                    ui.label("The model is on its way from the GPU.");
                    return;
                }
                layers.scrubber.ui(ui);
                ui.label(RichText::new(layers.caption()).strong());
                let empty = Picture::default();
                let picture = layers.picture().unwrap_or(&empty);
                model_ui(
                    ui,
                    texture.as_ref().map(|t| t.id()),
                    picture,
                    overlays,
                    SIDE,
                    |_| None,
                );
                ui.label(
                    "The density is exact for each k: log q_k(x) = log N(z) + log |det dz/dx| \
                     through those k maps alone. The grid and the samples (the same latent \
                     points for every k) are pushed through them.",
                );
            });
        if !open {
            self.windows.layers = None;
        }
    }
}
