//! The CPU trainer: the batch split into fixed parts over threads, each part's loss and
//! gradient by the flows' reverse mode, summed, then Adam.

use super::adam::Adam;
use super::objective::{Loss, SetupError, TrainError, TrainSettings, Trainer};
use crate::flow::{Flow, FlowModel};
use crate::real::Real;
use crate::rng::Rng;
use crate::stats::log_normal;
use crate::target::{Target, TargetKind};

/// Trains on the CPU in precision `T`, the batch split over threads.
pub struct CpuTrainer<T: Real> {
    model: FlowModel<T>,
    target: Target,
    settings: TrainSettings,
    adam: Adam<T>,
    rng: Rng,
    steps: usize,
    /// parameters held fixed (their gradient is zeroed, so Adam never moves them)
    frozen: std::ops::Range<usize>,
}

impl<T: Real> CpuTrainer<T> {
    pub fn new(
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, SetupError> {
        if settings.batch == 0 {
            return Err(SetupError::EmptyBatch);
        }
        let lr_in_precision = T::c(settings.learning_rate);
        if !(settings.learning_rate > 0.0
            && lr_in_precision.is_finite()
            && lr_in_precision > T::zero())
        {
            return Err(SetupError::LearningRate {
                precision: if T::IS_F32 { "f32" } else { "f64" },
                value: settings.learning_rate,
            });
        }
        if model.as_flow().dim() != target.dim() {
            return Err(SetupError::Dimension {
                flow: model.as_flow().dim(),
                target: target.name(),
                target_dim: target.dim(),
            });
        }
        if settings.loss == Loss::ForwardKl && target.kind() != TargetKind::Samples {
            return Err(SetupError::NoSampler(target.name()));
        }
        if settings.loss == Loss::ReverseKl && !target.has_density_gradient() {
            return Err(SetupError::NoDensityGradient(target.name()));
        }
        let n = model.as_flow().n_params();
        Ok(Self {
            model: model.cast(),
            adam: Adam::new(n, settings.learning_rate),
            rng: Rng::seeded(settings.seed ^ 0x7261_696e),
            target,
            settings,
            steps: 0,
            frozen: 0..0,
        })
    }

    /// Holds the parameters in `range` fixed from now on.
    pub fn freeze(&mut self, range: std::ops::Range<usize>) {
        let n = self.model.as_flow().n_params();
        self.frozen = range.start.min(n)..range.end.min(n);
    }

    pub fn model_t(&self) -> &FlowModel<T> {
        &self.model
    }

    /// Splits the batch into fixed parts shared over the threads; each part's
    /// loss sum and gradient are summed in the parts' order, so the thread
    /// count does not change the numbers.
    fn loss_and_grad(&self, inputs: &[T]) -> (f64, Vec<T>) {
        let flow = self.model.as_flow();
        let d = flow.dim();
        let n = inputs.len() / d;
        let parts = crate::parallel::map_parts(inputs, d, self.settings.threads, |chunk| {
            part_loss_grad(flow, &self.target, self.settings.loss, chunk, n)
        });
        let mut grad = vec![T::zero(); flow.n_params()];
        let mut loss = 0.0;
        for (l, g) in parts {
            loss += l;
            for (a, b) in grad.iter_mut().zip(g) {
                *a += b;
            }
        }
        (loss, grad)
    }
}

/// Loss sum (divided by the full batch size `n`) and gradient of one chunk.
fn part_loss_grad<T: Real>(
    flow: &dyn Flow<T>,
    target: &Target,
    loss: Loss,
    inputs: &[T],
    n: usize,
) -> (f64, Vec<T>) {
    let d = flow.dim();
    let m = inputs.len() / d;
    let inv_n = T::c(1.0 / n as f64);
    let mut out = vec![T::zero(); inputs.len()];
    let mut ld = vec![T::zero(); m];
    let mut grad = vec![T::zero(); flow.n_params()];
    match loss {
        Loss::ForwardKl => {
            // -log q = |z|^2/2 + const - ld
            let adjoint = |_: usize, z: &[T], _: T, z_bar: &mut [T]| {
                for (b, &v) in z_bar.iter_mut().zip(z) {
                    *b = v * inv_n;
                }
                -inv_n
            };
            flow.z_from_x_grad(inputs, &adjoint, &mut out, &mut ld, &mut grad);
            let mut total = 0.0;
            let mut z64 = vec![0.0; d];
            for i in 0..m {
                for j in 0..d {
                    z64[j] = out[i * d + j].to_f64();
                }
                total += -(log_normal(&z64) + ld[i].to_f64());
            }
            (total / n as f64, grad)
        }
        Loss::ReverseKl => {
            // log q(x) - log p~(x) with x = x_from_z(z), log q = log N(z) - ld
            let adjoint = |_: usize, x: &[T], _: T, x_bar: &mut [T]| {
                let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
                match target.log_density_grad(&x64) {
                    Some((_, g)) => {
                        for (b, gj) in x_bar.iter_mut().zip(g) {
                            *b = -T::c(gj) * inv_n;
                        }
                    }
                    None => x_bar.iter_mut().for_each(|b| *b = T::c(f64::NAN)),
                }
                -inv_n
            };
            flow.x_from_z_grad(inputs, &adjoint, &mut out, &mut ld, &mut grad);
            let mut total = 0.0;
            for i in 0..m {
                let z64: Vec<f64> = inputs[i * d..(i + 1) * d]
                    .iter()
                    .map(|v| v.to_f64())
                    .collect();
                let x64: Vec<f64> = out[i * d..(i + 1) * d].iter().map(|v| v.to_f64()).collect();
                let lp = target.log_density_grad(&x64).map_or(f64::NAN, |(v, _)| v);
                total += log_normal(&z64) - ld[i].to_f64() - lp;
            }
            (total / n as f64, grad)
        }
    }
}

impl<T: Real> Trainer for CpuTrainer<T> {
    fn step(&mut self) -> Result<f64, TrainError> {
        let d = self.target.dim();
        let b = self.settings.batch;
        let inputs: Vec<T> = match self.settings.loss {
            Loss::ForwardKl => self
                .target
                .sample(b, &mut self.rng)
                .unwrap_or_default()
                .into_iter()
                .map(T::c)
                .collect(),
            Loss::ReverseKl => (0..b * d).map(|_| T::c(self.rng.normal())).collect(),
        };
        let (loss, mut grad) = self.loss_and_grad(&inputs);
        grad[self.frozen.clone()]
            .iter_mut()
            .for_each(|g| *g = T::zero());
        if !loss.is_finite() || grad.iter().any(|g| !g.is_finite()) {
            return Err(TrainError::NonFinite {
                step: self.steps + 1,
            });
        }
        let before = self.model.as_flow().params().to_vec();
        let adam_before = self.adam.clone();
        self.adam
            .update(self.model.as_flow_mut().params_mut(), &grad);
        if self.model.as_flow().params().iter().any(|p| !p.is_finite()) {
            // Keep the last good state: parameters and optimizer as before the step.
            self.model
                .as_flow_mut()
                .params_mut()
                .copy_from_slice(&before);
            self.adam = adam_before;
            return Err(TrainError::NonFinite {
                step: self.steps + 1,
            });
        }
        self.steps += 1;
        Ok(loss)
    }

    fn steps_done(&self) -> usize {
        self.steps
    }

    fn model(&self) -> FlowModel<f64> {
        self.model.cast()
    }

    fn set_model(&mut self, model: &FlowModel<f64>) -> Result<(), SetupError> {
        let new: FlowModel<T> = model.cast();
        if new.as_flow().n_params() != self.model.as_flow().n_params()
            || new.as_flow().dim() != self.model.as_flow().dim()
        {
            return Err(SetupError::DifferentStructure);
        }
        self.model = new;
        Ok(())
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.adam.learning_rate = lr;
    }

    fn backend(&self) -> String {
        let precision = if T::IS_F32 { "f32" } else { "f64" };
        let threads = match self.settings.threads {
            1 => "1 thread".to_string(),
            n => format!("{n} threads"),
        };
        format!("CPU ({threads}, {precision})")
    }
}
