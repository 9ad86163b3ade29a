//! Rates measured on the wall clock (frames per second, training steps per
//! second): a count's growth over the last second or two of real time, so a
//! readout never counts only the time spent training, nor averages 1/dt
//! (which overstates a jerky frame rate).

use std::collections::VecDeque;
use web_time::{Duration, Instant};

/// The span of wall-clock time a rate is measured over.
const WINDOW: Duration = Duration::from_secs(2);

/// A count sampled over time, and how fast it grows.
#[derive(Clone, Debug, Default)]
pub struct RateMeter {
    /// (when, count) samples over the last [`WINDOW`] (and one before it)
    samples: VecDeque<(Instant, usize)>,
    /// when the count last grew
    last_growth: Option<Instant>,
}

impl RateMeter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the count now.
    pub fn record(&mut self, count: usize) {
        self.record_at(Instant::now(), count);
    }

    /// Records the count at `now` (the tests' clock).
    pub fn record_at(&mut self, now: Instant, count: usize) {
        let grew = self.samples.back().is_none_or(|&(_, c)| count > c);
        if grew {
            self.last_growth = Some(now);
        }
        self.samples.push_back((now, count));
        // keep one sample older than the window, so the window is covered
        while self.samples.len() > 2
            && self
                .samples
                .get(1)
                .is_some_and(|&(t, _)| now.duration_since(t) >= WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// The count's growth per second over the window (0 before two samples).
    pub fn per_second(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(&(t0, c0)), Some(&(t1, c1))) if t1 > t0 => {
                c1.saturating_sub(c0) as f64 / t1.duration_since(t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// How long the count has not grown (zero before the first sample).
    pub fn idle_for(&self, now: Instant) -> Duration {
        self.last_growth
            .map_or(Duration::ZERO, |t| now.duration_since(t))
    }

    /// Forgets the samples (a pause: the rate while paused is no rate).
    pub fn clear(&mut self) {
        self.samples.clear();
        self.last_growth = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_counted_on_the_wall_clock() {
        let start = Instant::now();
        let mut meter = RateMeter::new();
        // 10 steps every 100 ms: whatever each frame spent training, that is 100 steps/s
        for k in 0..30 {
            meter.record_at(start + Duration::from_millis(100 * k), 10 * k as usize);
        }
        assert!(
            (meter.per_second() - 100.0).abs() < 1e-9,
            "{}",
            meter.per_second()
        );
        // uneven frames: 1 frame of 1 s and 9 of 10 ms are 10 frames in 1.09 s
        let mut frames = RateMeter::new();
        let mut t = start;
        frames.record_at(t, 0);
        for k in 1..=10 {
            t += Duration::from_millis(if k == 1 { 1000 } else { 10 });
            frames.record_at(t, k);
        }
        assert!((frames.per_second() - 10.0 / 1.09).abs() < 1e-6);
    }

    #[test]
    fn a_count_that_stops_growing_is_idle() {
        let start = Instant::now();
        let mut meter = RateMeter::new();
        meter.record_at(start, 5);
        meter.record_at(start + Duration::from_secs(1), 6);
        meter.record_at(start + Duration::from_secs(4), 6);
        assert_eq!(
            meter.idle_for(start + Duration::from_secs(7)),
            Duration::from_secs(6)
        );
    }
}
