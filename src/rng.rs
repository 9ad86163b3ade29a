//! Seeded random numbers: every sampler and initializer takes one of these, so
//! the same seed gives the same numbers on every platform.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// A seeded generator with the few distributions the project needs.
#[derive(Debug)]
pub struct Rng {
    inner: StdRng,
    spare_normal: Option<f64>,
}

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        Self {
            inner: StdRng::seed_from_u64(seed),
            spare_normal: None,
        }
    }

    /// Uniform on [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.inner.random::<f64>()
    }

    /// Uniform integer in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.uniform() * n as f64) as usize).min(n.saturating_sub(1))
    }

    /// Standard normal (Box-Muller, both values used).
    pub fn normal(&mut self) -> f64 {
        if let Some(v) = self.spare_normal.take() {
            return v;
        }
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        self.spare_normal = Some(r * t.sin());
        r * t.cos()
    }

    /// Normal truncated to two standard deviations, rescaled to unit variance
    /// (the `lecun_normal` initializer of flax).
    pub fn truncated_normal(&mut self) -> f64 {
        loop {
            let v = self.normal();
            if v.abs() <= 2.0 {
                return v / 0.879_625_661_034_239_8;
            }
        }
    }
}
