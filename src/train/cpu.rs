//! The CPU trainer: the batch split into fixed parts over threads, each part's loss and
//! gradient by the flows' reverse mode, summed, then Adam.

use super::adam::Adam;
use super::objective::{Loss, SetupError, TrainError, TrainSettings, Trainer};
use crate::flow::{Flow, FlowModel};
use crate::real::{Real, on_widest_vectors_for};
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
    /// one gradient per part of the batch, kept from step to step
    part_grads: Vec<Vec<T>>,
    /// the batch's gradient, the parts' sum (kept from step to step)
    grad: Vec<T>,
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
            part_grads: Vec::new(),
            grad: Vec::new(),
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

    /// A step's batch: samples of the target (forward KL) or of N(0, I)
    /// (reverse KL), drawn from the trainer's own generator.
    pub fn draw_batch(&mut self) -> Vec<T> {
        batch_in::<T>(&self.target, &self.settings, &mut self.rng)
    }

    /// How many fixed parts `batch` is split into (see [`crate::parallel`]).
    pub fn part_count(&self, batch: &[T]) -> usize {
        crate::parallel::part_count(batch.len(), self.target.dim())
    }

    /// The loss sums of the parts numbered `parts` of `batch`, in order,
    /// each part's gradient kept for [`Self::finish_step`]. A share of the
    /// batch gives the same numbers here as in a whole step, so several
    /// workers can split a step between them.
    pub fn compute_parts(&mut self, batch: &[T], parts: std::ops::Range<usize>) -> Vec<f64> {
        let flow = self.model.as_flow();
        let d = flow.dim();
        let n = batch.len() / d;
        let n_params = flow.n_params();
        let (target, loss_kind) = (&self.target, self.settings.loss);
        crate::parallel::map_some_parts_with(
            batch,
            d,
            parts,
            self.settings.threads,
            &mut self.part_grads,
            || vec![T::zero(); n_params],
            |chunk, grad| part_loss_grad(flow, target, loss_kind, chunk, n, grad),
        )
    }

    /// A whole step's parts: [`Self::draw_batch`] then [`Self::compute_parts`],
    /// the same numbers (every target draws the whole batch it is asked for,
    /// or none), with the batch drawn while the other threads wake up.
    fn draw_and_compute_parts(&mut self) -> Vec<f64> {
        let flow = self.model.as_flow();
        let d = flow.dim();
        let n_params = flow.n_params();
        let (target, settings, rng) = (&self.target, &self.settings, &mut self.rng);
        let n = settings.batch;
        crate::parallel::map_drawn_parts_with(
            n * d,
            d,
            settings.threads,
            || batch_in::<T>(target, settings, rng),
            &mut self.part_grads,
            || vec![T::zero(); n_params],
            |chunk, grad| part_loss_grad(flow, target, settings.loss, chunk, n, grad),
        )
    }

    /// Part `index`'s gradient as last computed or set (empty before any).
    pub fn part_grad(&self, index: usize) -> &[T] {
        self.part_grads.get(index).map_or(&[], Vec::as_slice)
    }

    /// Part `index`'s gradient, computed elsewhere (a helper worker's share).
    pub fn set_part_grad(&mut self, index: usize, grad: &[T]) {
        let n_params = self.model.as_flow().n_params();
        if self.part_grads.len() <= index {
            self.part_grads
                .resize_with(index + 1, || vec![T::zero(); n_params]);
        }
        let part = &mut self.part_grads[index];
        part.clear();
        part.extend_from_slice(grad);
    }

    /// Ends a step whose parts' loss sums are `losses` (their gradients
    /// computed or set): sums them in the parts' order, so the numbers do
    /// not depend on who computed which part, and takes Adam's step.
    pub fn finish_step(&mut self, losses: &[f64]) -> Result<f64, TrainError> {
        let n_params = self.model.as_flow().n_params();
        self.grad.clear();
        self.grad.resize(n_params, T::zero());
        let parts = &self.part_grads[..losses.len().min(self.part_grads.len())];
        let loss = losses[..parts.len()].iter().fold(0.0, |sum, l| sum + l);
        // each thread a block of the sum, the parts added in their order (the
        // same numbers on any count), a cache block at a time
        let threads = self.settings.threads.max(1);
        let per = super::adam::block_len(n_params, threads);
        let frozen = self.frozen.clone();
        let mut blocks: Vec<_> = (self.grad.chunks_mut(per).enumerate())
            .map(|block| (block, false))
            .collect();
        crate::parallel::for_each_mut(&mut blocks, threads, |((b, sum), finite)| {
            let start = *b * per;
            *finite = on_widest_vectors_for(
                sum.len(),
                #[inline(always)]
                || {
                    const CACHED: usize = 4096;
                    for (c, sum) in sum.chunks_mut(CACHED).enumerate() {
                        let from = start + c * CACHED;
                        for part in parts {
                            let part = part.get(from..).unwrap_or(&[]);
                            sum.iter_mut().zip(part).for_each(|(a, &g)| *a += g);
                        }
                    }
                    let held = frozen.start.clamp(start, start + sum.len())
                        ..frozen.end.clamp(start, start + sum.len());
                    sum[held.start - start..held.end - start].fill(T::zero());
                    sum.iter().fold(true, |all, g| all & g.is_finite())
                },
            );
        });
        let grad_finite = blocks.iter().all(|(_, finite)| *finite);
        if !loss.is_finite() || !grad_finite {
            return Err(TrainError::NonFinite {
                step: self.steps + 1,
            });
        }
        // A step that would leave a parameter non-finite is not taken: the
        // last good state (parameters and optimizer) stays.
        if !self.adam.update_if_finite_on_threads(
            self.model.as_flow_mut().params_mut(),
            &self.grad,
            threads,
        ) {
            return Err(TrainError::NonFinite {
                step: self.steps + 1,
            });
        }
        self.steps += 1;
        Ok(loss)
    }

    /// The parameters in this trainer's precision.
    pub fn params_t(&self) -> &[T] {
        self.model.as_flow().params()
    }

    /// Replaces the parameters (a helper worker takes the lead's at each
    /// step); false, and nothing changed, for a different count.
    pub fn set_params_t(&mut self, params: &[T]) -> bool {
        let own = self.model.as_flow_mut().params_mut();
        if own.len() != params.len() {
            return false;
        }
        own.copy_from_slice(params);
        true
    }
}

/// A step's batch ([`super::draw_batch`]) in precision `T`.
fn batch_in<T: Real>(target: &Target, settings: &TrainSettings, rng: &mut Rng) -> Vec<T> {
    super::draw_batch(target, settings, rng)
        .into_iter()
        .map(T::c)
        .collect()
}

/// Loss sum (divided by the full batch size `n`) of one chunk; its gradient
/// is written into `grad` (a part's buffer, kept from step to step).
fn part_loss_grad<T: Real>(
    flow: &dyn Flow<T>,
    target: &Target,
    loss: Loss,
    inputs: &[T],
    n: usize,
    grad: &mut [T],
) -> f64 {
    // the flows add their gradients into it
    grad.fill(T::zero());
    let d = flow.dim();
    let m = inputs.len() / d;
    let inv_n = T::c(1.0 / n as f64);
    let mut out = vec![T::zero(); inputs.len()];
    let mut ld = vec![T::zero(); m];
    match loss {
        Loss::ForwardKl => {
            // -log q = |z|^2/2 + const - ld
            let adjoint = |_: usize, z: &[T], _: T, z_bar: &mut [T]| {
                for (b, &v) in z_bar.iter_mut().zip(z) {
                    *b = v * inv_n;
                }
                -inv_n
            };
            flow.z_from_x_grad(inputs, &adjoint, &mut out, &mut ld, grad);
            let mut total = 0.0;
            let mut z64 = vec![0.0; d];
            for i in 0..m {
                for j in 0..d {
                    z64[j] = out[i * d + j].to_f64();
                }
                total += -(log_normal(&z64) + ld[i].to_f64());
            }
            total / n as f64
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
            flow.x_from_z_grad(inputs, &adjoint, &mut out, &mut ld, grad);
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
            total / n as f64
        }
    }
}

impl<T: Real> Trainer for CpuTrainer<T> {
    fn step(&mut self) -> Result<f64, TrainError> {
        crate::parallel::on_threads(self.settings.threads, || {
            let losses = self.draw_and_compute_parts();
            self.finish_step(&losses)
        })
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
