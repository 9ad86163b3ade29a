//! Training lattice coupling flows on the phi^4 field on the GPU, by reverse
//! KL. A layer is a convolutional conditioner (periodic 3 x 3 convolutions
//! computed directly) feeding the scalar stacks of the active sites. The
//! convolutions mix neighbouring sites, so `lattice_layer.wgsl` gives each
//! field a workgroup of its own, which takes it through a whole layer; as for
//! the coupling flows ([`super::coupling`]) a step is a fixed list of
//! dispatches recorded once and replayed: a dispatch per layer forward, the
//! action and the loss, per layer backwards the conditioner again (only the
//! field snapshots are kept) with the stacks' reverse mode and the adjoints
//! down to the passive sites, then that layer's weight gradients (a sum over
//! the batch, a workgroup an entry); last the batch sum and Adam. A field is
//! never split over workgroups, so a real GPU is kept busy by the batch, not
//! by the lattice.

mod ops;

use crate::flow::{ConvDesign, Flow, FlowModel, LatticeSpec};
use crate::gpu::GpuError;
use crate::gpu::optimizer::{FlowKernels, GpuOptimizer};
use crate::gpu::plan::{self, Pipelines, Plan, Purpose};
use crate::gpu::specialize::stack_values;
use crate::gpu::{GpuContext, shader};
use crate::target::Target;
use crate::target::phi4::Phi4;
use crate::train::{Loss, TrainSettings};
use ops::{Kernel, Layout, build_plan, work_bytes};

/// The shader of the layer kernels, specialized for `spec` and `model`.
fn layer_source(spec: &LatticeSpec, model: &Phi4) -> Result<String, GpuError> {
    let n_raw = spec.stack.n_raw();
    let odd = match (spec.z2, spec.stack.odd_raw()) {
        (true, Some(mask)) => mask,
        (true, None) => {
            return Err(GpuError::unsupported(
                "this stack has no odd form for the Z2 design",
            ));
        }
        (false, _) => vec![false; n_raw],
    };
    let odd = odd
        .iter()
        .map(|&b| if b { "1u" } else { "0u" })
        .collect::<Vec<_>>()
        .join(", ");
    let c = model.couplings;
    let mut values = stack_values(&spec.stack)?;
    values.extend([
        ("COPIES", if spec.z2 { "2" } else { "1" }.to_string()),
        ("W", spec.width.to_string()),
        ("DEPTH", spec.depth.to_string()),
        ("M2", format!("{:?}", c.m2 as f32)),
        ("LAMBDA", format!("{:?}", c.lambda as f32)),
        ("ODD", odd),
    ]);
    shader::compose("lattice_layer.wgsl", &values).map_err(GpuError::from)
}

/// A lattice coupling flow's training state on the GPU (reverse KL on phi^4).
pub struct GpuLatticeTrainer {
    opt: GpuOptimizer,
    ctx: GpuContext,
    spec: LatticeSpec,
    /// the flow: its structure, with the parameters last known on the CPU
    model: FlowModel<f64>,
    pipelines: Pipelines<Kernel>,
    train: Plan<Kernel>,
    display_plan: Option<Plan<Kernel>>,
}

/// The lattice flow's kernels, specialized for `spec` and the theory.
fn compile(
    ctx: &GpuContext,
    spec: &LatticeSpec,
    theory: &Phi4,
) -> Result<Pipelines<Kernel>, GpuError> {
    let layer = layer_source(spec, theory)?;
    let sum = shader::compose("batch_sum.wgsl", &[])?;
    Ok(Pipelines::new(
        ctx,
        &[
            (
                Kernel::LayerForward,
                "lattice layer forward",
                &layer,
                "layer_forward_main",
            ),
            (
                Kernel::LayerBackward,
                "lattice layer backward",
                &layer,
                "layer_backward_main",
            ),
            (
                Kernel::WeightGrad,
                "lattice weight grad",
                &layer,
                "weight_grad_main",
            ),
            (Kernel::Loss, "lattice loss", &layer, "loss_main"),
            (Kernel::Sum, "lattice sum", &sum, "sum_main"),
        ],
    ))
}

impl GpuLatticeTrainer {
    pub fn new(
        ctx: GpuContext,
        model: FlowModel<f64>,
        target: Target,
        settings: TrainSettings,
    ) -> Result<Self, GpuError> {
        let FlowModel::Lattice(flow) = &model else {
            return Err(GpuError::unsupported(
                "the GPU lattice trainer takes a lattice flow",
            ));
        };
        let spec = flow.spec.clone();
        if spec.conv != ConvDesign::default() {
            return Err(GpuError::unsupported(
                "the GPU lattice trainer runs the residual 3 x 3 GELU conditioner with an \
                 identity head; other conditioners train on the CPU",
            ));
        }
        let Target::Phi4(theory) = target else {
            return Err(GpuError::unsupported(format!(
                "the GPU trains lattice flows on phi^4 targets, not '{}'",
                target.name()
            )));
        };
        if settings.loss != Loss::ReverseKl {
            return Err(GpuError::unsupported(
                "lattice flows train by reverse KL (phi^4 has no sampler)",
            ));
        }
        if theory.size != spec.size {
            return Err(GpuError::unsupported(format!(
                "the flow is on a {0} x {0} lattice but the target on {1} x {1}",
                spec.size, theory.size
            )));
        }
        let training = Purpose::Train(Loss::ReverseKl);
        plan::check_fits(
            &ctx,
            settings.batch,
            work_bytes(&spec, settings.batch, training),
        )?;
        let pipelines = compile(&ctx, &spec, &theory)?;
        let batch = settings.batch;
        let opt = GpuOptimizer::new(&ctx, flow.params(), spec.volume(), target, settings)?;
        let train = build_plan(
            &ctx,
            &pipelines,
            &spec,
            batch,
            training,
            [&opt.params, &opt.total],
        );
        Ok(Self {
            opt,
            ctx,
            spec: flow.spec.clone(),
            model: model.clone(),
            pipelines,
            train,
            display_plan: None,
        })
    }

    /// Dispatches per training step: the recorded operations plus Adam.
    pub fn dispatches_per_step(&self) -> usize {
        self.train.dispatches() + 1
    }

    /// `log q(phi)` of every field (n x V) with the current parameters.
    pub async fn log_q_async(&mut self, fields: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.display(Purpose::LogQ, fields).await
    }

    /// Latent fields (n x V) pushed through `x_from_z`: per field the
    /// configuration and `log |det dx/dz|` (n x (V + 1)).
    pub async fn x_from_z_async(&mut self, latent: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.display(Purpose::Push, latent).await
    }

    /// Runs a display plan for exactly these fields (rebuilt when the count
    /// or purpose changes) and reads its outputs back.
    async fn display(&mut self, purpose: Purpose, fields: &[f32]) -> Result<Vec<f32>, GpuError> {
        let v = self.spec.volume();
        let n = fields.len() / v;
        if n == 0 {
            return Ok(Vec::new());
        }
        if work_bytes(&self.spec, n, purpose) > plan::max_binding_bytes(&self.ctx) {
            return Err(GpuError::unsupported(format!(
                "{n} fields do not fit the GPU at once"
            )));
        }
        if self
            .display_plan
            .as_ref()
            .is_none_or(|p| p.n != n || p.purpose != purpose)
        {
            self.display_plan = Some(build_plan(
                &self.ctx,
                &self.pipelines,
                &self.spec,
                n,
                purpose,
                [&self.opt.params, &self.opt.total],
            ));
        }
        let Some(plan) = self.display_plan.as_ref() else {
            unreachable!("built above")
        };
        plan.upload(&self.ctx, &fields[..n * v]);
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        plan.encode(&self.pipelines, &mut encoder);
        self.ctx.queue.submit([encoder.finish()]);
        let width = if purpose == Purpose::LogQ { 1 } else { v + 1 };
        let bytes = self
            .ctx
            .read_back_async(
                &plan.work,
                Layout::new(&self.spec, n, purpose).display as u64 * 4,
                (n * width * 4) as u64,
            )
            .await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&bytes).to_vec())
    }
}

impl FlowKernels for GpuLatticeTrainer {
    fn optimizer(&self) -> &GpuOptimizer {
        &self.opt
    }

    fn optimizer_mut(&mut self) -> &mut GpuOptimizer {
        &mut self.opt
    }

    fn encode_gradient(&self, batch: &[f32], encoder: &mut wgpu::CommandEncoder) {
        self.train.upload(&self.ctx, batch);
        self.train.encode(&self.pipelines, encoder);
    }

    fn held(&self) -> &FlowModel<f64> {
        &self.model
    }

    fn held_mut(&mut self) -> &mut FlowModel<f64> {
        &mut self.model
    }
}
