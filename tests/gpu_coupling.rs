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

/// A small coupling flow, its parameters moved off the initialisation so every
/// gradient entry is exercised, rounded to float32.
fn flow(family: Family, stack: usize, rng: &mut Rng) -> CouplingFlow<f64> {
    let spec = CouplingSpec {
        dim: 2,
        layers: 3,
        width: 20, // not a multiple of the 16 x 16 tiles
        depth: 2,
        stack: Stack::uniform(family, stack),
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
    for family in FAMILIES {
        let stack = if family == Family::Affine { 1 } else { 2 };
        let flow = flow(family, stack, &mut rng);
        let target = Target::Moons;
        let points32 = f32s(&target.sample(batch, &mut rng).unwrap());
        let (loss_cpu, grad_cpu) = cpu_forward_kl(&flow, &f64s(&points32));
        let model = FlowModel::Coupling(flow.clone());
        let mut gpu =
            GpuTrainer::new(context(), model, target, settings(batch, Loss::ForwardKl)).unwrap();
        let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&points32).unwrap();
        let label = format!("coupling {family:?}");
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
    assert!(gpu.dispatches_per_step() > 10);
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
    assert!(too_big.is_err_and(|e| e.contains("smaller batch")));
    let no_energy = GpuTrainer::new(
        context(),
        FlowModel::Coupling(flow),
        Target::Moons,
        settings(16, Loss::ReverseKl),
    );
    assert!(no_energy.is_err());
}
