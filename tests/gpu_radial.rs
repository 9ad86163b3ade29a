//! Radial flows trained on the GPU (WGSL through wgpu; lavapipe here) against
//! the float64 CPU reference: loss and every gradient, for direct and
//! angle-dependent flows and each analytic family. No adapter is a failure.
#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]

use flowplay::bijection::{Family, Stack};
use flowplay::flow::{Flow, FlowModel, RadialConditioner, RadialFlow, RadialSpec};
use flowplay::gpu::GpuTrainer;
use flowplay::rng::Rng;
use flowplay::target::Target;
use flowplay::train::{Loss, TrainSettings, Trainer};

mod gpu_common;
use gpu_common::{
    assert_display_matches_cpu, assert_matches_cpu, context, cpu_forward_kl, cpu_reverse_kl,
};

/// The radial flow with exactly the float32 parameters the GPU holds.
fn rounded_to_f32(flow: RadialFlow<f64>) -> RadialFlow<f64> {
    match gpu_common::rounded_to_f32(FlowModel::Radial(flow)) {
        FlowModel::Radial(f) => f,
        _ => unreachable!("casting keeps the kind of flow"),
    }
}

/// A radial flow of `stack` with perturbed parameters: loss, gradient, samples
/// and density on the GPU against the CPU reference on the same float32 values.
fn assert_radial_parity(
    label: &str,
    stack: Stack,
    conditioner: RadialConditioner,
    spread: f64,
    batch: usize,
    rng: &mut Rng,
) {
    let spec = RadialSpec {
        dim: 2,
        stack,
        conditioner,
    };
    let mut flow =
        RadialFlow::<f64>::init(spec, Some(&[0.2, -0.3]), Some(&[0.1, -0.2]), rng).unwrap();
    for v in flow.params_mut().iter_mut().skip(4) {
        *v += spread * rng.normal();
    }
    // the CPU reference uses exactly the float32 parameters and points
    let flow = rounded_to_f32(flow);
    let target = Target::Moons;
    let points32: Vec<f32> = target
        .sample(batch, rng)
        .unwrap()
        .iter()
        .map(|&v| v as f32)
        .collect();
    let points64: Vec<f64> = points32.iter().map(|&v| v as f64).collect();
    let (loss_cpu, grad_cpu) = cpu_forward_kl(&flow, &points64);
    let settings = TrainSettings {
        batch,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let mut gpu =
        GpuTrainer::new(context(), FlowModel::Radial(flow.clone()), target, settings).unwrap();
    let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&points32).unwrap();
    assert_matches_cpu(label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
    // Samples and grid lines: latent points pushed through x_from_z; the
    // density kernel: log q at every point.
    let latent32: Vec<f32> = (0..batch * 2)
        .map(|_| (1.5 * rng.normal()) as f32)
        .collect();
    let pushed = gpu.x_from_z(&latent32).unwrap();
    let lq_gpu = gpu.log_q(&points32).unwrap();
    assert_display_matches_cpu(label, &flow, &latent32, &pushed, &points32, &lq_gpu);
}

#[test]
fn gpu_radial_loss_and_gradients_match_the_cpu() {
    let mut rng = Rng::seeded(4);
    let spline = Family::Spline(flowplay::bijection::SplineShape {
        bins: 6,
        bound: 3.0,
    });
    for family in [
        Family::CubicRational,
        Family::Sinh,
        Family::Cubic,
        Family::Affine,
        spline,
    ] {
        for conditioner in [
            RadialConditioner::Direct,
            RadialConditioner::Fourier { order: 3 },
        ] {
            let spread = if conditioner == RadialConditioner::Direct {
                0.3
            } else {
                0.1
            };
            let label = format!("{family:?} {conditioner:?}");
            let stack = Stack::uniform(family, 4);
            assert_radial_parity(&label, stack, conditioner, spread, 64, &mut rng);
        }
    }
}

/// A mixed stack (every family in turn) on the GPU, direct and angle-dependent.
#[test]
fn gpu_radial_mixed_stacks_match_the_cpu() {
    let mut rng = Rng::seeded(8);
    let stack = Stack::mixed(vec![
        Family::Sinh,
        Family::Cubic,
        Family::Spline(flowplay::bijection::SplineShape {
            bins: 5,
            bound: 3.0,
        }),
        Family::CubicRational,
        Family::Affine,
    ]);
    for conditioner in [
        RadialConditioner::Direct,
        RadialConditioner::Fourier { order: 2 },
    ] {
        let label = format!("mixed {conditioner:?}");
        assert_radial_parity(&label, stack.clone(), conditioner, 0.1, 40, &mut rng);
    }
}

#[test]
fn gpu_training_steps_lower_the_loss_and_keep_state_on_the_gpu() {
    let mut rng = Rng::seeded(5);
    let spec = RadialSpec {
        dim: 2,
        stack: Stack::uniform(Family::Cubic, 8),
        conditioner: RadialConditioner::Fourier { order: 3 },
    };
    let flow =
        RadialFlow::<f64>::init(spec, Some(&[0.0, 0.0]), Some(&[0.0, 0.0]), &mut rng).unwrap();
    let settings = TrainSettings {
        batch: 256,
        learning_rate: 1e-2,
        seed: 1,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let mut gpu =
        GpuTrainer::new(context(), FlowModel::Radial(flow), Target::Rings, settings).unwrap();
    let first: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    for _ in 0..150 {
        gpu.step().unwrap();
    }
    let last: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    assert!(last < first - 0.3, "loss {first} -> {last}");
    assert_eq!(gpu.steps_done(), 160);
    let model = gpu.model();
    assert!(model.as_flow().params().iter().all(|p| p.is_finite()));
}

fn recipe(
    target: Target,
    kind: flowplay::flow::FlowKind,
    steps: usize,
) -> flowplay::train::config::RunConfig {
    use flowplay::flow::FlowConfig;
    use flowplay::train::config::{Precision, RunConfig};
    let mut flow = FlowConfig::defaults(kind);
    let spiral = matches!(target, Target::Spiral);
    flow.center = Some(if spiral {
        vec![-0.5, -1.0]
    } else {
        vec![0.0, 0.0]
    });
    flow.log_scale = Some(vec![0.0, 0.0]);
    RunConfig {
        target,
        flow,
        steps,
        settings: TrainSettings {
            batch: 512,
            learning_rate: 1e-2,
            seed: 0,
            loss: Loss::ForwardKl,
            threads: 2,
        },
        precision: Precision::F32,
        eval_samples: 20_000,
    }
}

/// (GPU, CPU) held-out NLL after training the same recipe from the same
/// initial model on the same batches.
fn both_backends(config: &flowplay::train::config::RunConfig) -> (f64, f64) {
    use flowplay::run::report::report;
    use flowplay::train::config::{cpu_trainer, initial_model, train_with};
    let gpu = GpuTrainer::new(
        context(),
        initial_model(config).unwrap(),
        config.target.clone(),
        config.settings.clone(),
    )
    .unwrap();
    let gpu_outcome = train_with(config, Box::new(gpu), &mut |_, _| {});
    let cpu_outcome = train_with(config, cpu_trainer(config).unwrap(), &mut |_, _| {});
    assert!(gpu_outcome.stopped.is_none() && cpu_outcome.stopped.is_none());
    let nll = |o| report(config, o)["test_nll"].as_f64().unwrap();
    let (g, c) = (nll(&gpu_outcome), nll(&cpu_outcome));
    eprintln!(
        "{}: GPU {g:.4} nats in {:.1} s, CPU {c:.4} nats in {:.1} s",
        config.target.name(),
        gpu_outcome.seconds,
        cpu_outcome.seconds
    );
    (g, c)
}

/// Training parity where the outcome is well defined: a direct radial flow on
/// the annulus (one ring: the rings' several rings give the flow local optima
/// that float32 rounding alone can choose between) lands within 0.03 nats of
/// the CPU trainer after 500 steps. Later, at this learning rate, the run
/// passes through loss spikes whose outcome rounding alone decides: at 1500
/// steps two CPU builds that differ only in rounding gave 2.35 and 2.39 nats,
/// float64 2.51; at 500 steps all three agree within 0.01.
#[test]
fn gpu_training_matches_the_cpu_trainer() {
    let (g, c) = both_backends(&recipe(
        Target::Annulus,
        flowplay::flow::FlowKind::Radial,
        500,
    ));
    assert!((g - c).abs() <= 0.03, "GPU {g} vs CPU {c}");
}

/// The spiral reference recipe (the paper's reference recipe) on the GPU reaches the
/// paper's quality as the CPU does. Per run, the two differ by up to ~0.06 nats:
/// the recipe (Adam at 1e-2) is chaotic, and float32 rounding differences
/// between the backends (lavapipe's exp/log are not glibc's) grow into different
/// end points, as different seeds do on one backend (-0.645 to -0.714 on the CPU).
#[test]
fn gpu_spiral_recipe_reaches_the_papers_nll() {
    let (g, c) = both_backends(&recipe(
        Target::Spiral,
        flowplay::flow::FlowKind::RadialFourier,
        5000,
    ));
    assert!(g <= -0.62 && c <= -0.62, "GPU {g}, CPU {c}");
    assert!((g - c).abs() <= 0.1, "GPU {g} vs CPU {c}");
}

/// Reverse KL on the GPU (energy targets) against the CPU in float64.
#[test]
fn gpu_reverse_kl_loss_and_gradients_match_the_cpu() {
    let batch = 64;
    let mut rng = Rng::seeded(6);
    for target in [
        Target::TwoMoonsEnergy,
        Target::CircularGmm,
        Target::RingMixture { rings: 2 },
    ] {
        for (family, conditioner) in [
            (Family::Cubic, RadialConditioner::Fourier { order: 3 }),
            (Family::CubicRational, RadialConditioner::Direct),
            (Family::Sinh, RadialConditioner::Direct),
        ] {
            let spec = RadialSpec {
                dim: 2,
                stack: Stack::uniform(family, 4),
                conditioner: conditioner.clone(),
            };
            let mut flow =
                RadialFlow::<f64>::init(spec, Some(&[0.1, 0.2]), Some(&[-0.3, 0.1]), &mut rng)
                    .unwrap();
            for v in flow.params_mut().iter_mut().skip(4) {
                *v += 0.1 * rng.normal();
            }
            let flow = rounded_to_f32(flow);
            let z32: Vec<f32> = (0..batch * 2).map(|_| rng.normal() as f32).collect();
            let z64: Vec<f64> = z32.iter().map(|&v| v as f64).collect();
            let (loss_cpu, grad_cpu) = cpu_reverse_kl(&flow, &target, &z64);
            let settings = TrainSettings {
                batch,
                learning_rate: 1e-3,
                seed: 0,
                loss: Loss::ReverseKl,
                threads: 1,
            };
            let mut gpu = GpuTrainer::new(
                context(),
                FlowModel::Radial(flow.clone()),
                target.clone(),
                settings,
            )
            .unwrap();
            let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&z32).unwrap();
            let label = format!("{} {family:?} {conditioner:?}", target.name());
            assert_matches_cpu(&label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
        }
    }
}

/// Near the centre, where f(r) - f(0) and r + f(0) cancel in float32, the GPU
/// kernels agree with float64 as the CPU's float32 path does.
#[test]
fn gpu_radial_flows_are_accurate_near_the_centre() {
    let ctx = context();
    let spline = Family::Spline(flowplay::bijection::SplineShape {
        bins: 6,
        bound: 3.0,
    });
    let mut rng = Rng::seeded(21);
    let mut gpu_ctx = Some(ctx);
    for family in [
        Family::CubicRational,
        Family::Sinh,
        Family::Cubic,
        Family::Affine,
        spline,
    ] {
        let stack = Stack::uniform(family, 1);
        let spec = RadialSpec {
            dim: 2,
            stack: stack.clone(),
            conditioner: RadialConditioner::Direct,
        };
        let mut flow =
            RadialFlow::<f64>::init(spec, Some(&[0.3, -0.2]), Some(&[0.1, -0.1]), &mut rng)
                .unwrap();
        // shift the layer so that f(0) is far from 0
        let raw: Vec<f64> = stack
            .default_raw(&mut || rng.normal())
            .into_iter()
            .map(|v| v + 0.5 * rng.normal() + 0.7)
            .collect();
        flow.params_mut()[4..].copy_from_slice(&raw);
        let model32: FlowModel<f32> = FlowModel::Radial(flow).cast();
        let FlowModel::Radial(reference) = model32.cast::<f64>() else {
            unreachable!()
        };
        let mut points32 = Vec::new();
        for (k, scale) in [1e-6f64, 1e-5, 1e-4, 1e-3, 1e-2].into_iter().enumerate() {
            let angle = 0.7 + k as f64;
            points32.push((0.3 + scale * angle.cos()) as f32);
            points32.push((-0.2 + scale * angle.sin()) as f32);
        }
        let points64: Vec<f64> = points32.iter().map(|&v| v as f64).collect();
        let settings = TrainSettings {
            batch: 5,
            learning_rate: 1e-3,
            seed: 0,
            loss: Loss::ForwardKl,
            threads: 1,
        };
        let ctx = gpu_ctx.take().unwrap_or_else(context);
        let mut gpu = GpuTrainer::new(
            ctx,
            FlowModel::Radial(reference.clone()),
            Target::Moons,
            settings,
        )
        .unwrap();
        let lq = gpu.log_q(&points32).unwrap();
        let lq_ref = flowplay::train::metrics::log_q(&reference, &points64);
        let pushed = gpu.x_from_z(&points32).unwrap();
        let mut x_ref = vec![0.0; 10];
        let mut ld_ref = vec![0.0; 5];
        reference.x_from_z(&points64, &mut x_ref, &mut ld_ref);
        for i in 0..5 {
            assert!(
                (lq[i] as f64 - lq_ref[i]).abs() <= 1e-3 * (1.0 + lq_ref[i].abs()),
                "{family:?} point {i}: log q {} vs {}",
                lq[i],
                lq_ref[i]
            );
            assert!(
                (pushed[3 * i + 2] as f64 - ld_ref[i]).abs() <= 1e-3 * (1.0 + ld_ref[i].abs()),
                "{family:?} point {i}: log det {} vs {}",
                pushed[3 * i + 2],
                ld_ref[i]
            );
            for j in 0..2 {
                assert!(
                    (pushed[3 * i + j] as f64 - x_ref[2 * i + j]).abs()
                        <= 1e-4 * (1.0 + x_ref[2 * i + j].abs())
                );
            }
        }
    }
}

/// A batch whose per-sample gradients exceed the device's buffers is refused
/// with a clear message (not a wgpu validation panic).
#[test]
fn oversized_batches_are_refused_clearly() {
    let mut rng = Rng::seeded(0);
    let spec = RadialSpec {
        dim: 2,
        stack: Stack::uniform(Family::Cubic, 64),
        conditioner: RadialConditioner::Fourier { order: 3 },
    };
    let flow = RadialFlow::<f64>::init(spec, None, None, &mut rng).unwrap();
    // 2^22 samples: some 30 GB of gradients, over any device's binding
    let settings = TrainSettings {
        batch: 1 << 22,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    let err = GpuTrainer::new(context(), FlowModel::Radial(flow), Target::Spiral, settings)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("use a smaller batch"), "{err}");
}
