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
        let rule = Rule::at(self.t, self.learning_rate);
        // zipped slices, no indices: the compiler then runs the rule on
        // several parameters at once
        let moments = self.m.iter_mut().zip(self.v.iter_mut());
        for ((m, v), (p, &g)) in moments.zip(params.iter_mut().zip(grad)) {
            (*m, *v, *p) = rule.apply(*m, *v, *p, g);
        }
    }

    /// [`Self::update`] where every new parameter is finite; otherwise
    /// nothing changes (neither the parameters nor the moments) and it returns
    /// false. Checking first, then writing, spares a copy of the state to
    /// restore, which for a coupling flow is megabytes a step.
    pub fn update_if_finite(&mut self, params: &mut [T], grad: &[T]) -> bool {
        let rule = Rule::at(self.t + 1, self.learning_rate);
        // every parameter tested, no early exit, so the test runs as
        // vector code (a non-finite step is rare: it ends the run)
        let moments = self.m.iter().zip(&self.v);
        let all_finite = moments
            .zip(params.iter().zip(grad))
            .fold(true, |all, ((&m, &v), (&p, &g))| {
                all & rule.apply(m, v, p, g).2.is_finite()
            });
        if all_finite {
            self.update(params, grad);
        }
        all_finite
    }
}

/// The constants of update number `t`.
struct Rule<T> {
    b1: T,
    b2: T,
    c1: T,
    c2: T,
    lr: T,
    eps: T,
}

impl<T: Real> Rule<T> {
    fn at(t: u64, learning_rate: f64) -> Self {
        let t = t.min(i32::MAX as u64) as i32;
        Self {
            b1: T::c(BETA1),
            b2: T::c(BETA2),
            c1: T::c(1.0 / (1.0 - BETA1.powi(t))),
            c2: T::c(1.0 / (1.0 - BETA2.powi(t))),
            lr: T::c(learning_rate),
            eps: T::c(EPS),
        }
    }

    /// The new (m, v, parameter) of one parameter `p` with gradient `g`.
    #[inline(always)]
    fn apply(&self, m: T, v: T, p: T, g: T) -> (T, T, T) {
        let m = self.b1 * m + (T::one() - self.b1) * g;
        let v = self.b2 * v + (T::one() - self.b2) * g * g;
        let m_hat = m * self.c1;
        let v_hat = v * self.c2;
        (m, v, p - self.lr * m_hat / (v_hat.sqrt() + self.eps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_that_would_overflow_changes_nothing() {
        // the first update moves each parameter by the learning rate: the
        // second one would pass f32::MAX
        let mut adam = Adam::<f32>::new(2, 3e38);
        let mut params = vec![1.0f32, 3e38];
        assert!(!adam.update_if_finite(&mut params, &[1.0, -1.0]));
        assert_eq!(params, vec![1.0, 3e38]);
        assert_eq!(adam.steps(), 0);
        assert!(adam.m.iter().chain(&adam.v).all(|&x| x == 0.0));
        adam.learning_rate = 1e-3;
        // a finite update is the plain update, bit for bit
        let mut plain = Adam::<f32>::new(2, 1e-3);
        let mut expected = vec![1.0f32, 2.0];
        plain.update(&mut expected, &[0.5, -0.25]);
        let mut params = vec![1.0f32, 2.0];
        assert!(adam.update_if_finite(&mut params, &[0.5, -0.25]));
        assert_eq!(params, expected);
        assert_eq!(adam.steps(), 1);
    }
}
