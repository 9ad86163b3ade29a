//! The control of both pages' "Layer by layer" windows: which of a flow's
//! maps are applied (k of N), a slider, and "Morph", which plays k from 0 to
//! N over a few seconds.

use eframe::egui;
use web_time::Instant;

/// How long "Morph" takes from k = 0 to k = N.
const MORPH_SECONDS: f32 = 4.0;

/// k of N maps, and the morph while it plays.
#[derive(Clone, Debug, Default)]
pub struct Scrubber {
    /// maps applied: 0 = the latent space, `n` = the whole flow
    pub k: usize,
    n: usize,
    morph: Option<Instant>,
}

impl Scrubber {
    /// The flow's number of maps; a new count (another flow) starts at the
    /// whole flow.
    pub fn set_n(&mut self, n: usize) {
        if n != self.n {
            self.n = n;
            self.k = n;
            self.morph = None;
        }
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Whether "Morph" is playing.
    pub fn morphing(&self) -> bool {
        self.morph.is_some()
    }

    /// Moves the morph on: k grows with the time since it started, and it
    /// ends on the whole flow.
    pub fn advance(&mut self) {
        let Some(start) = self.morph else {
            return;
        };
        let t = start.elapsed().as_secs_f32() / MORPH_SECONDS;
        if t >= 1.0 {
            self.k = self.n;
            self.morph = None;
        } else {
            self.k = ((t * self.n as f32).floor() as usize).min(self.n);
        }
    }

    /// The slider and the Morph (or Stop) button.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            let slider = egui::Slider::new(&mut self.k, 0..=self.n).text("maps applied");
            if ui
                .add(slider)
                .on_hover_text(
                    "k: the flow cut after its first k maps (0: none, the latent space).",
                )
                .changed()
            {
                self.morph = None;
            }
            let label = if self.morph.is_some() {
                "Stop"
            } else {
                "Morph"
            };
            if ui
                .button(label)
                .on_hover_text("Plays k from 0 to all the maps: the normal becoming the model.")
                .clicked()
            {
                self.morph = match self.morph {
                    Some(_) => None,
                    None => {
                        self.k = 0;
                        Some(Instant::now())
                    }
                };
            }
        });
    }
}
