//! Adam (beta1 0.9, beta2 0.999, eps 1e-8), with optax's update rule.

use crate::real::{Real, on_widest_vectors_for};

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
        self.update_on_threads(params, grad, 1);
    }

    /// [`Self::update`] where every new parameter is finite; otherwise
    /// nothing changes (neither the parameters nor the moments) and it returns
    /// false. Checking first, then writing, spares a copy of the state to
    /// restore, which for a coupling flow is megabytes a step.
    pub fn update_if_finite(&mut self, params: &mut [T], grad: &[T]) -> bool {
        self.update_if_finite_on_threads(params, grad, 1)
    }

    /// [`Self::update_if_finite`] with the parameters split in blocks over up to
    /// `threads` threads: each parameter's numbers are the same on any count.
    pub fn update_if_finite_on_threads(
        &mut self,
        params: &mut [T],
        grad: &[T],
        threads: usize,
    ) -> bool {
        let rule = Rule::at(self.t + 1, self.learning_rate);
        let per = block_len(params.len(), threads);
        let mut blocks: Vec<_> = (self.m.chunks(per).zip(self.v.chunks(per)))
            .zip(params.chunks(per).zip(grad.chunks(per)))
            .map(|block| (block, false))
            .collect();
        // every parameter tested, no early exit, so the test runs as vector
        // code (a non-finite step is rare: it ends the run)
        crate::parallel::for_each_mut(&mut blocks, threads, |(((m, v), (p, g)), finite)| {
            *finite = on_widest_vectors_for(
                p.len(),
                #[inline(always)]
                || {
                    let moments = m.iter().zip(v.iter());
                    moments
                        .zip(p.iter().zip(g.iter()))
                        .fold(true, |all, ((&m, &v), (&p, &g))| {
                            all & rule.apply(m, v, p, g).2.is_finite()
                        })
                },
            );
        });
        let all_finite = blocks.iter().all(|(_, finite)| *finite);
        if all_finite {
            self.update_on_threads(params, grad, threads);
        }
        all_finite
    }

    /// [`Self::update`], the parameters split as in [`Self::update_if_finite_on_threads`].
    fn update_on_threads(&mut self, params: &mut [T], grad: &[T], threads: usize) {
        self.t += 1;
        let rule = Rule::at(self.t, self.learning_rate);
        let per = block_len(params.len(), threads);
        let mut blocks: Vec<_> = (self.m.chunks_mut(per).zip(self.v.chunks_mut(per)))
            .zip(params.chunks_mut(per).zip(grad.chunks(per)))
            .collect();
        crate::parallel::for_each_mut(&mut blocks, threads, |((m, v), (p, g))| {
            // zipped slices, no indices: the compiler then runs the rule on
            // several parameters at once
            on_widest_vectors_for(
                p.len(),
                #[inline(always)]
                || {
                    let moments = m.iter_mut().zip(v.iter_mut());
                    for ((m, v), (p, &g)) in moments.zip(p.iter_mut().zip(g.iter())) {
                        (*m, *v, *p) = rule.apply(*m, *v, *p, g);
                    }
                },
            );
        });
    }
}

/// Parameters from which the optimizer's step is split over threads: below
/// it, waking the pool's threads costs about what the work does (a radial
/// flow has a few thousand, a coupling flow hundreds of thousands).
pub const SPLIT_FROM: usize = 8192;

/// The length of the blocks `n` parameters are split into for `threads`
/// threads: one block per thread, whole cache lines; one block below
/// [`SPLIT_FROM`]; never empty.
pub fn block_len(n: usize, threads: usize) -> usize {
    if n < SPLIT_FROM {
        return n.max(1);
    }
    n.div_ceil(threads.max(1)).next_multiple_of(16)
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

    #[test]
    fn blocks_on_threads_give_the_same_update_and_one_bad_block_stops_all() {
        let n = 3 * SPLIT_FROM.max(crate::real::WIDE_FROM);
        let grad: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let start: Vec<f32> = (0..n).map(|i| (i as f32).sin()).collect();
        let mut one = Adam::<f32>::new(n, 1e-2);
        let mut three = Adam::<f32>::new(n, 1e-2);
        let (mut p1, mut p3) = (start.clone(), start.clone());
        for _ in 0..3 {
            assert!(one.update_if_finite(&mut p1, &grad));
            assert!(three.update_if_finite_on_threads(&mut p3, &grad, 3));
        }
        // the same bits on one thread and three
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&p3), bits(&p1));
        assert_eq!(bits(&three.m), bits(&one.m));
        assert_eq!(bits(&three.v), bits(&one.v));
        // both ran their blocks (of WIDE_FROM values or more) on the widest
        // vectors: the same bits as the rule applied one parameter at a time
        let (mut m, mut v, mut p) = (vec![0f32; n], vec![0f32; n], start.clone());
        for t in 1..=3 {
            let rule = Rule::at(t, 1e-2);
            for i in 0..n {
                (m[i], v[i], p[i]) = rule.apply(m[i], v[i], p[i], grad[i]);
            }
        }
        assert_eq!(bits(&p1), bits(&p));
        assert_eq!(bits(&one.m), bits(&m));
        assert_eq!(bits(&one.v), bits(&v));
        // a parameter in the last block about to overflow: no block moves
        let mut bad = p3.clone();
        // (its gradient has been positive: the step moves it down, past -MAX)
        bad[n - 1] = -f32::MAX;
        let before = (bits(&three.m), bits(&three.v), bits(&bad));
        let mut huge = three.clone();
        huge.learning_rate = 1e37;
        assert!(!huge.update_if_finite_on_threads(&mut bad, &grad, 3));
        assert_eq!((bits(&huge.m), bits(&huge.v), bits(&bad)), before);
        assert_eq!(huge.steps(), three.steps());
    }
}
