//! Coupling flows trained on the GPU (WGSL through wgpu; lavapipe here) against
//! the float64 CPU reference: loss and every gradient, the pushed points and
//! log q, for each scalar family and both losses. No adapter is a failure.
#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]

use flowplay::bijection::{Family, SplineShape, Stack};
use flowplay::flow::{CouplingFlow, CouplingSpec, Flow, FlowModel};
use flowplay::gpu::GpuTrainer;
use flowplay::rng::Rng;
use flowplay::target::Target;
use flowplay::train::{Loss, TrainError, TrainSettings, Trainer};

mod gpu_common;
use gpu_common::{
    assert_display_matches_cpu, assert_matches_cpu, context, cpu_forward_kl, cpu_reverse_kl,
    rounded_to_f32,
};

const FAMILIES: [Family; 5] = [
    Family::CubicRational,
    Family::Sinh,
    Family::Cubic,
    Family::Affine,
    Family::Spline(SplineShape {
        bins: 6,
        bound: 3.0,
    }),
];

/// A stack of every family in turn (spline layers of one shape).
fn mixed_stack() -> Stack {
    Stack::mixed(vec![
        Family::Cubic,
        FAMILIES[4],
        Family::Sinh,
        Family::Affine,
        Family::CubicRational,
    ])
}

/// A small coupling flow, its parameters moved off the initialisation so every
/// gradient entry is exercised, rounded to float32.
fn flow(family: Family, stack: usize, rng: &mut Rng) -> CouplingFlow<f64> {
    flow_with(Stack::uniform(family, stack), rng)
}

fn flow_with(stack: Stack, rng: &mut Rng) -> CouplingFlow<f64> {
    let spec = CouplingSpec {
        dim: 2,
        layers: 3,
        width: 20, // not a multiple of the 16 x 16 tiles
        depth: 2,
        stack,
    };
    let mut flow = CouplingFlow::<f64>::init(spec, rng).unwrap();
    for v in flow.params_mut() {
        *v += 0.05 * rng.normal();
    }
    match rounded_to_f32(FlowModel::Coupling(flow)) {
        FlowModel::Coupling(f) => f,
        _ => unreachable!("casting keeps the kind of flow"),
    }
}

fn settings(batch: usize, loss: Loss) -> TrainSettings {
    TrainSettings {
        batch,
        learning_rate: 1e-3,
        seed: 0,
        loss,
        threads: 1,
    }
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
fn gpu_coupling_loss_gradients_and_display_match_the_cpu() {
    let batch = 50; // not a multiple of the tiles either
    let mut rng = Rng::seeded(11);
    let mut stacks: Vec<Stack> = FAMILIES
        .iter()
        .map(|&f| Stack::uniform(f, if f == Family::Affine { 1 } else { 2 }))
        .collect();
    stacks.push(mixed_stack());
    for stack in stacks {
        let label = format!("coupling {:?}", stack.layers());
        let flow = flow_with(stack, &mut rng);
        let target = Target::Moons;
        let points32 = f32s(&target.sample(batch, &mut rng).unwrap());
        let (loss_cpu, grad_cpu) = cpu_forward_kl(&flow, &f64s(&points32));
        let model = FlowModel::Coupling(flow.clone());
        let mut gpu =
            GpuTrainer::new(context(), model, target, settings(batch, Loss::ForwardKl)).unwrap();
        let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&points32).unwrap();
        assert_matches_cpu(&label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
        let latent32: Vec<f32> = (0..batch * 2)
            .map(|_| (1.5 * rng.normal()) as f32)
            .collect();
        let pushed = gpu.x_from_z(&latent32).unwrap();
        let log_q = gpu.log_q(&points32).unwrap();
        assert_display_matches_cpu(&label, &flow, &latent32, &pushed, &points32, &log_q);
    }
}

#[test]
fn gpu_coupling_reverse_kl_matches_the_cpu() {
    let batch = 40;
    let mut rng = Rng::seeded(12);
    for (target, family) in [
        (Target::TwoMoonsEnergy, Family::CubicRational),
        (Target::CircularGmm, Family::Sinh),
        (Target::RingMixture { rings: 2 }, Family::Cubic),
    ] {
        let flow = flow(family, 2, &mut rng);
        let z32: Vec<f32> = (0..batch * 2).map(|_| rng.normal() as f32).collect();
        let (loss_cpu, grad_cpu) = cpu_reverse_kl(&flow, &target, &f64s(&z32));
        let model = FlowModel::Coupling(flow);
        let label = format!("coupling {} {family:?}", target.name());
        let mut gpu =
            GpuTrainer::new(context(), model, target, settings(batch, Loss::ReverseKl)).unwrap();
        let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&z32).unwrap();
        assert_matches_cpu(&label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
    }
}

/// The display kernels run in chunks: a grid larger than one chunk comes back
/// whole and in order.
#[test]
fn gpu_coupling_log_q_covers_grids_larger_than_a_chunk() {
    let mut rng = Rng::seeded(13);
    let spec = CouplingSpec {
        dim: 2,
        layers: 2,
        width: 8,
        depth: 1,
        stack: Stack::uniform(Family::CubicRational, 1),
    };
    let mut flow = CouplingFlow::<f64>::init(spec, &mut rng).unwrap();
    for v in flow.params_mut() {
        *v += 0.05 * rng.normal();
    }
    let n = 70_001;
    let points32: Vec<f32> = (0..n * 2).map(|_| (2.0 * rng.normal()) as f32).collect();
    let mut gpu = GpuTrainer::new(
        context(),
        FlowModel::Coupling(flow.clone()),
        Target::Moons,
        settings(16, Loss::ForwardKl),
    )
    .unwrap();
    let log_q = gpu.log_q(&points32).unwrap();
    let reference = flowplay::train::metrics::log_q(&flow, &f64s(&points32));
    assert_eq!(log_q.len(), n);
    for (g, c) in log_q.iter().zip(&reference) {
        assert!(
            (*g as f64 - c).abs() <= 1e-4 * c.abs().max(1.0),
            "{g} vs {c}"
        );
    }
}

/// Steps on the GPU lower the loss; the model read back is finite and has the
/// structure it started with.
#[test]
fn gpu_coupling_training_lowers_the_loss() {
    let mut rng = Rng::seeded(14);
    let spec = CouplingSpec {
        dim: 2,
        layers: 4,
        width: 32,
        depth: 1,
        stack: Stack::uniform(Family::CubicRational, 1),
    };
    let flow = CouplingFlow::<f64>::init(spec.clone(), &mut rng).unwrap();
    let mut train = settings(128, Loss::ForwardKl);
    train.learning_rate = 5e-3;
    let mut gpu =
        GpuTrainer::new(context(), FlowModel::Coupling(flow), Target::Moons, train).unwrap();
    let first: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    for _ in 0..150 {
        gpu.step().unwrap();
    }
    let last: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    assert!(last < first - 0.2, "loss {first} -> {last}");
    assert_eq!(gpu.steps_done(), 160);
    let FlowModel::Coupling(trained) = gpu.model() else {
        panic!("the GPU trainer returned another kind of flow")
    };
    assert_eq!(trained.spec, spec);
    assert!(trained.params().iter().all(|p| p.is_finite()));
    // a dispatch a layer forward, two backward, the loss, the batch sum, Adam
    assert_eq!(gpu.dispatches_per_step(), 3 * spec.layers + 3);
}

/// A step whose gradient overflows stops with NonFinite and keeps the state
/// from before it.
#[test]
fn gpu_coupling_divergence_keeps_the_last_good_state() {
    let mut rng = Rng::seeded(15);
    let spec = CouplingSpec {
        dim: 2,
        layers: 2,
        width: 8,
        depth: 1,
        stack: Stack::uniform(Family::Affine, 1),
    };
    let mut flow = CouplingFlow::<f64>::init(spec, &mut rng).unwrap();
    // the last output bias is the last layer's shift t: a shift of 1e20 makes
    // |z|^2 overflow float32
    let n = flow.params().len();
    flow.params_mut()[n - 1] = 1e20;
    let before = flow.params().to_vec();
    let mut gpu = GpuTrainer::new(
        context(),
        FlowModel::Coupling(flow),
        Target::Moons,
        settings(32, Loss::ForwardKl),
    )
    .unwrap();
    match gpu.step() {
        Err(TrainError::NonFinite { step: 1 }) => {}
        other => panic!("expected a non-finite step, got {other:?}"),
    }
    let after = gpu.model();
    for (a, b) in after.as_flow().params().iter().zip(&before) {
        assert_eq!(*a, (*b as f32) as f64);
    }
}

#[test]
fn gpu_refuses_what_it_cannot_train() {
    let mut rng = Rng::seeded(16);
    let flow = flow(Family::Cubic, 1, &mut rng);
    let too_big = GpuTrainer::new(
        context(),
        FlowModel::Coupling(flow.clone()),
        Target::Moons,
        settings(50_000_000, Loss::ForwardKl),
    );
    assert!(too_big.is_err_and(|e| e.to_string().contains("smaller batch")));
    let no_energy = GpuTrainer::new(
        context(),
        FlowModel::Coupling(flow),
        Target::Moons,
        settings(16, Loss::ReverseKl),
    );
    assert!(no_energy.is_err());
}

/// The deformed grid stays on the GPU: a Cartesian grid's polylines pushed
/// from one GPU buffer into another (what the app draws from), with log det for
/// shading, against the CPU; the same for a radial flow's polar grid.
#[test]
fn deformed_grids_are_pushed_between_gpu_buffers() {
    use flowplay::flow::grid;
    use flowplay::flow::{RadialConditioner, RadialFlow, RadialSpec};
    let mut rng = Rng::seeded(17);
    let coupling = FlowModel::Coupling(flow(Family::Sinh, 2, &mut rng));
    let radial_spec = RadialSpec {
        dim: 2,
        stack: Stack::uniform(Family::Cubic, 4),
        conditioner: RadialConditioner::Fourier { order: 2 },
    };
    let (c, s) = ([0.2, -0.1], [0.1, 0.05]);
    let mut radial = RadialFlow::<f64>::init(radial_spec, Some(&c), Some(&s), &mut rng).unwrap();
    for v in radial.params_mut().iter_mut().skip(4) {
        *v += 0.1 * rng.normal();
    }
    let radial = rounded_to_f32(FlowModel::Radial(radial));
    for (label, model, lines) in [
        ("coupling", coupling, grid::cartesian(-3.0, 3.0, 9, 33)),
        (
            "radial",
            radial,
            grid::polar(c, s, &[0.5, 1.0, 1.5, 2.0], 12, 48),
        ),
    ] {
        let n = lines.len();
        let latent: Vec<f32> = lines.points.iter().map(|&v| v as f32).collect();
        let mut gpu = GpuTrainer::new(
            context(),
            model.clone(),
            Target::Moons,
            settings(16, Loss::ForwardKl),
        )
        .unwrap();
        let ctx = gpu.context();
        let latent_buffer = ctx.storage("grid", bytemuck::cast_slice(&latent), true);
        let pushed_buffer = ctx.storage("pushed grid", &vec![0u8; n * 3 * 4], true);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        gpu.encode_x_from_z(&mut encoder, &latent_buffer, &pushed_buffer, n)
            .unwrap();
        let ctx = gpu.context();
        ctx.queue.submit([encoder.finish()]);
        let bytes = ctx.read_back(&pushed_buffer).unwrap();
        let pushed: Vec<f32> = bytemuck::cast_slice(&bytes).to_vec();
        // log q of the pushed points, too, from buffer to buffer
        let x: Vec<f32> = pushed.chunks(3).flat_map(|p| [p[0], p[1]]).collect();
        let points_buffer = ctx.storage("points", bytemuck::cast_slice(&x), true);
        let log_q_buffer = ctx.storage("log q", &vec![0u8; n * 4], true);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        gpu.encode_log_q(&mut encoder, &points_buffer, &log_q_buffer, n)
            .unwrap();
        let ctx = gpu.context();
        ctx.queue.submit([encoder.finish()]);
        let log_q: Vec<f32> = bytemuck::cast_slice(&ctx.read_back(&log_q_buffer).unwrap()).to_vec();
        assert_display_matches_cpu(label, model.as_flow(), &latent, &pushed, &x, &log_q);
    }
}

/// Several steps with one read-back (the app's way) train exactly as the same
/// steps one at a time, for both kinds of flow; a non-finite loss among them
/// restores the state from before them.
#[test]
fn batched_steps_match_single_steps_and_restore_on_nan() {
    use flowplay::flow::{RadialConditioner, RadialFlow, RadialSpec};
    let mut rng = Rng::seeded(18);
    let radial = RadialSpec {
        dim: 2,
        stack: Stack::uniform(Family::Cubic, 4),
        conditioner: RadialConditioner::Direct,
    };
    let radial =
        RadialFlow::<f64>::init(radial, Some(&[0.0, 0.0]), Some(&[0.0, 0.0]), &mut rng).unwrap();
    for model in [
        FlowModel::Coupling(flow(Family::CubicRational, 1, &mut rng)),
        FlowModel::Radial(radial),
    ] {
        let train = settings(64, Loss::ForwardKl);
        let mut one =
            GpuTrainer::new(context(), model.clone(), Target::Moons, train.clone()).unwrap();
        let mut batched = GpuTrainer::new(context(), model.clone(), Target::Moons, train).unwrap();
        let single: Vec<f64> = (0..6).map(|_| one.step().unwrap()).collect();
        let together = pollster::block_on(batched.steps_async(6)).unwrap();
        assert_eq!(single, together);
        assert_eq!(batched.steps_done(), 6);
        let (a, b) = (one.model(), batched.model());
        assert_eq!(a.as_flow().params(), b.as_flow().params());
    }
    // a shift of 1e20 overflows |z|^2: nothing of the batch is kept
    let mut bad = flow(Family::Affine, 1, &mut rng);
    let n = bad.params().len();
    bad.params_mut()[n - 1] = 1e20;
    let before: Vec<f64> = bad.params().iter().map(|&v| (v as f32) as f64).collect();
    let mut gpu = GpuTrainer::new(
        context(),
        FlowModel::Coupling(bad),
        Target::Moons,
        settings(32, Loss::ForwardKl),
    )
    .unwrap();
    match pollster::block_on(gpu.steps_async(4)) {
        Err(TrainError::NonFinite { step: 1 }) => {}
        other => panic!("expected a non-finite first step, got {other:?}"),
    }
    assert_eq!(gpu.steps_done(), 0);
    assert_eq!(gpu.model().as_flow().params(), &before[..]);
}
