//! Adam (beta1 0.9, beta2 0.999, eps 1e-8), with optax's update rule.

use crate::real::Real;

#[derive(Clone, Debug)]
pub struct Adam<T> {
    pub learning_rate: f64,
    m: Vec<T>,
    v: Vec<T>,
    t: u64,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

impl<T: Real> Adam<T> {
    pub fn new(n: usize, learning_rate: f64) -> Self {
        Self {
            learning_rate,
            m: vec![T::zero(); n],
            v: vec![T::zero(); n],
            t: 0,
        }
    }

    /// Number of updates applied so far.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// `params -= lr * m_hat / (sqrt(v_hat) + eps)`.
    pub fn update(&mut self, params: &mut [T], grad: &[T]) {
        self.t += 1;
        let (b1, b2) = (T::c(BETA1), T::c(BETA2));
        let c1 = T::c(1.0 / (1.0 - BETA1.powi(self.t.min(i32::MAX as u64) as i32)));
        let c2 = T::c(1.0 / (1.0 - BETA2.powi(self.t.min(i32::MAX as u64) as i32)));
        let lr = T::c(self.learning_rate);
        let eps = T::c(EPS);
        for i in 0..params.len() {
            let g = grad[i];
            self.m[i] = b1 * self.m[i] + (T::one() - b1) * g;
            self.v[i] = b2 * self.v[i] + (T::one() - b2) * g * g;
            let m_hat = self.m[i] * c1;
            let v_hat = self.v[i] * c2;
            params[i] -= lr * m_hat / (v_hat.sqrt() + eps);
        }
    }
}
