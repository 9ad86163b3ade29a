//! Watching a run's loss for divergence before it reaches NaN.
//!
//! A loss that overflows is easy to catch; the costly case is a learning rate
//! a little too high, where the loss climbs from a few nats to hundreds and
//! training goes on. The watch keeps a running mean of the loss and of its
//! batch-to-batch noise, remembers the best level so far (the first loss, the
//! fresh model's, or a lower running mean since), and calls a run diverged
//! when the mean jumps far above that best (many times its noise then, and at
//! least [`MIN_JUMP`] nats) or stays above it for [`CLIMB_STEPS`] steps. A
//! learning rate that throws the model off in its first steps is caught at
//! the end of the warm-up, against the first loss.
//! Losses are in nats and may be negative (a reverse KL without log Z), so
//! every rule is a difference, never a ratio.

/// A loss above this (or not finite) is a divergence at once.
pub const LOSS_LIMIT: f64 = 1e6;
/// Steps before the jump and climb rules apply (a fresh model's loss moves fast).
const WARM_UP: usize = 20;
/// Weight of each new loss in the running mean (about 20 steps).
const MEAN_WEIGHT: f64 = 0.05;
/// The smallest rise of the running mean above its best that counts as a jump.
pub const MIN_JUMP: f64 = 10.0;
/// A jump is also at least this many times the noise at the best point.
const JUMP_NOISES: f64 = 8.0;
/// A mean this far above its best (nats, or twice the noise) is not healthy.
const UNEASY: f64 = 1.0;
/// Steps the mean may stay unhealthy before the run counts as climbing.
pub const CLIMB_STEPS: usize = 300;

/// How a run diverged.
#[derive(Clone, Debug, PartialEq)]
pub enum Divergence {
    /// The loss was NaN, infinite or above [`LOSS_LIMIT`].
    Overflow { loss: f64, step: usize },
    /// The running mean rose from `from` (its best, at `best_step`) to `to`.
    Jump {
        from: f64,
        to: f64,
        best_step: usize,
        step: usize,
    },
    /// The running mean stayed above its best `from` for `steps` steps, up to `to`.
    Climb {
        from: f64,
        to: f64,
        steps: usize,
        step: usize,
    },
}

impl Divergence {
    /// The step at which it was noticed.
    pub fn step(&self) -> usize {
        match self {
            Self::Overflow { step, .. } | Self::Jump { step, .. } | Self::Climb { step, .. } => {
                *step
            }
        }
    }

    /// Whether the parameters now are worse than an earlier state (a climb
    /// or a jump), rather than one bad step that the trainer undid.
    pub fn drifted(&self) -> bool {
        !matches!(self, Self::Overflow { .. })
    }
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Overflow { loss, step } => {
                write!(f, "training diverged (loss {loss:.3e} at step {step})")
            }
            Self::Jump {
                from,
                to,
                best_step,
                step,
            } => write!(
                f,
                "training diverged: the loss jumped from {from:.2} (step {best_step}) to {to:.2} (step {step})"
            ),
            Self::Climb {
                from,
                to,
                steps,
                step,
            } => write!(
                f,
                "training diverged: the loss has stayed above its best, {from:.2}, for {steps} steps and is {to:.2} at step {step}"
            ),
        }
    }
}

/// What the watch makes of the latest loss.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The running mean is near its best: a good moment for a checkpoint.
    Healthy,
    /// Above its best by more than the noise, not (yet) a divergence.
    Uneasy,
    Diverged(Divergence),
}

/// The running state of one run's loss.
#[derive(Clone, Debug, Default)]
pub struct LossWatch {
    steps: usize,
    mean: f64,
    /// running mean of |loss - mean|
    noise: f64,
    /// the best level so far: the first loss, or the lowest running mean
    /// since; its step and the noise then
    best: Option<(f64, usize, f64)>,
    /// the first step of the current unhealthy stretch
    uneasy_since: Option<usize>,
}

impl LossWatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the loss of step `step` and says how the run is doing.
    pub fn observe(&mut self, loss: f64, step: usize) -> Verdict {
        if !(loss.is_finite() && loss < LOSS_LIMIT) {
            return Verdict::Diverged(Divergence::Overflow { loss, step });
        }
        self.steps += 1;
        if self.steps == 1 {
            self.mean = loss;
            self.best = Some((loss, step, 0.0));
        } else {
            self.noise += MEAN_WEIGHT * ((loss - self.mean).abs() - self.noise);
            self.mean += MEAN_WEIGHT * (loss - self.mean);
        }
        if self.steps < WARM_UP {
            // too early to judge a divergence, not too early to doubt: a
            // fresh model's loss should fall, so only a loss at or below
            // the first is a good moment for a checkpoint
            let first = self.best.map_or(loss, |b| b.0);
            return if loss > first + UNEASY {
                Verdict::Uneasy
            } else {
                Verdict::Healthy
            };
        }
        let (best, best_step, best_noise) = match self.best {
            Some(b) if b.0 <= self.mean => b,
            _ => {
                self.best = Some((self.mean, step, self.noise));
                self.uneasy_since = None;
                return Verdict::Healthy;
            }
        };
        let rise = self.mean - best;
        if rise > MIN_JUMP.max(JUMP_NOISES * best_noise) {
            return Verdict::Diverged(Divergence::Jump {
                from: best,
                to: self.mean,
                best_step,
                step,
            });
        }
        if rise <= UNEASY.max(2.0 * best_noise) {
            self.uneasy_since = None;
            return Verdict::Healthy;
        }
        let since = *self.uneasy_since.get_or_insert(step);
        if step - since >= CLIMB_STEPS {
            return Verdict::Diverged(Divergence::Climb {
                from: best,
                to: self.mean,
                steps: step - since,
                step,
            });
        }
        Verdict::Uneasy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Feeds `losses` from step 1 on; the first divergence, if any.
    fn first_divergence(losses: impl IntoIterator<Item = f64>) -> Option<Divergence> {
        let mut watch = LossWatch::new();
        losses
            .into_iter()
            .zip(1..)
            .find_map(|(loss, step)| match watch.observe(loss, step) {
                Verdict::Diverged(d) => Some(d),
                _ => None,
            })
    }

    /// A training curve: from `start` down to `end` with batch noise.
    fn falling(start: f64, end: f64, steps: usize, noise: f64, seed: u64) -> Vec<f64> {
        let mut rng = Rng::seeded(seed);
        (0..steps)
            .map(|i| {
                let t = i as f64 / steps as f64;
                end + (start - end) * (-6.0 * t).exp() + noise * rng.normal()
            })
            .collect()
    }

    #[test]
    fn ordinary_training_curves_never_diverge() {
        for seed in 0..5 {
            // forward KL on a 2D target, a noisy reverse KL, a negative one
            assert_eq!(first_divergence(falling(26.0, 3.0, 5000, 0.05, seed)), None);
            assert_eq!(first_divergence(falling(40.0, 2.0, 5000, 1.5, seed)), None);
            assert_eq!(
                first_divergence(falling(-20.0, -180.0, 5000, 4.0, seed)),
                None
            );
        }
    }

    #[test]
    fn a_loss_that_climbs_fifty_fold_is_a_jump() {
        let mut losses = falling(20.0, 2.0, 400, 0.05, 1);
        losses.extend((0..200).map(|i| 2.0 + 98.0 * i as f64 / 200.0));
        let Some(Divergence::Jump { from, to, step, .. }) = first_divergence(losses) else {
            panic!("a fifty-fold climb must be a jump");
        };
        assert!((from - 2.0).abs() < 0.2, "best {from}");
        assert!(to > from + MIN_JUMP && to < 30.0, "noticed at {to}");
        assert!((400..520).contains(&step), "noticed at step {step}");
    }

    #[test]
    fn a_slow_rise_is_a_climb_and_a_spike_is_not() {
        let mut losses = falling(20.0, 2.0, 400, 0.05, 2);
        losses.extend((0..600).map(|i| 2.0 + 3.0 * i as f64 / 600.0));
        let climb = first_divergence(losses);
        assert!(matches!(climb, Some(Divergence::Climb { steps, .. }) if steps >= CLIMB_STEPS));

        let mut spiked = falling(20.0, 2.0, 1000, 0.05, 3);
        spiked[600] = 60.0;
        assert_eq!(first_divergence(spiked), None);
    }

    #[test]
    fn a_model_thrown_off_in_its_first_steps_is_caught_against_its_first_loss() {
        // a coupling flow at a radial flow's learning rate (measured: rings,
        // 16 cubic-rational maps a layer, lr 0.01): 4 nats, then 26, 12, 22...
        let mut losses = vec![4.0];
        losses.extend(falling(26.0, 12.0, 100, 4.0, 4));
        let Some(Divergence::Jump {
            from,
            best_step,
            step,
            ..
        }) = first_divergence(losses)
        else {
            panic!("not caught");
        };
        assert_eq!((from, best_step), (4.0, 1));
        assert!((20..40).contains(&step), "noticed at step {step}");
    }

    #[test]
    fn nan_and_huge_losses_overflow_at_once() {
        for bad in [f64::NAN, f64::INFINITY, 2e6] {
            let d = first_divergence([3.0, 2.9, bad]);
            assert_eq!(
                d.as_ref().map(Divergence::step),
                Some(3),
                "{bad} is noticed at its step"
            );
            assert!(!d.is_some_and(|d| d.drifted()));
        }
    }
}
