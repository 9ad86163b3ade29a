//! Lattice coupling flows trained on the phi^4 field on the GPU (WGSL through
//! wgpu; lavapipe here) against the float64 CPU reference (`LatticeFlow`):
//! reverse-KL loss and every gradient entry, the pushed fields with their log
//! det, and log q, for each scalar family, the Z2-equivariant design and
//! conditioners of depth 0 to 2. No adapter is a failure.
#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]

use flowplay::bijection::{Family, SplineShape, Stack};
use flowplay::flow::{Flow, FlowModel, LatticeFlow, LatticeSpec};
use flowplay::gpu::GpuTrainer;
use flowplay::rng::Rng;
use flowplay::target::Target;
use flowplay::target::phi4::{Couplings, Phi4};
use flowplay::train::{Loss, TrainError, TrainSettings, Trainer};

mod gpu_common;
use gpu_common::{
    assert_display_matches_cpu, assert_matches_cpu, context, cpu_reverse_kl, rounded_to_f32,
};

fn phi4(size: usize, m2: f64, lambda: f64) -> Target {
    Target::Phi4(Phi4::new(size, Couplings { m2, lambda }).unwrap())
}

/// A lattice flow moved off its initialisation so every gradient entry is
/// exercised, rounded to float32.
fn lattice_flow(spec: LatticeSpec, rng: &mut Rng) -> LatticeFlow<f64> {
    let mut flow = LatticeFlow::<f64>::init(spec, rng).unwrap();
    for v in flow.params_mut() {
        *v += 0.05 * rng.normal();
    }
    match rounded_to_f32(FlowModel::Lattice(flow)) {
        FlowModel::Lattice(f) => f,
        _ => unreachable!("casting keeps the kind of flow"),
    }
}

fn settings(batch: usize) -> TrainSettings {
    TrainSettings {
        batch,
        learning_rate: 1e-3,
        seed: 0,
        loss: Loss::ReverseKl,
        threads: 1,
    }
}

fn normals(n: usize, scale: f64, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| (scale * rng.normal()) as f32).collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Loss and gradient of reverse KL, then x_from_z and log q, GPU against CPU.
fn assert_parity(label: &str, spec: LatticeSpec, target: &Target, batch: usize, rng: &mut Rng) {
    let flow = lattice_flow(spec, rng);
    let v = flow.dim();
    let z32 = normals(batch * v, 1.0, rng);
    let (loss_cpu, grad_cpu) = cpu_reverse_kl(&flow, target, &f64s(&z32));
    let model = FlowModel::Lattice(flow.clone());
    let mut gpu = GpuTrainer::new(context(), model, target.clone(), settings(batch)).unwrap();
    let (loss_gpu, grad_gpu) = gpu.loss_and_grad(&z32).unwrap();
    assert_matches_cpu(label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
    // display: a different count of fields than the batch
    let latent = normals(3 * v, 1.2, rng);
    let pushed = gpu.x_from_z(&latent).unwrap();
    let fields: Vec<f32> = pushed.chunks(v + 1).flat_map(|p| p[..v].to_vec()).collect();
    let log_q = gpu.log_q(&fields).unwrap();
    assert_display_matches_cpu(label, &flow, &latent, &pushed, &fields, &log_q);
}

#[test]
fn gpu_lattice_flows_match_the_cpu_for_every_family() {
    let mut rng = Rng::seeded(31);
    let target = phi4(4, -4.0, 8.0);
    let spline = Family::Spline(SplineShape {
        bins: 5,
        bound: 3.0,
    });
    let stacks = [
        Stack::uniform(Family::CubicRational, 2),
        Stack::uniform(Family::Sinh, 1),
        Stack::uniform(Family::Cubic, 2),
        Stack::uniform(Family::Affine, 1),
        Stack::uniform(spline, 1),
        Stack::mixed(vec![Family::Cubic, Family::Sinh, Family::Affine]),
    ];
    for (k, stack) in stacks.into_iter().enumerate() {
        let spec = LatticeSpec {
            conv: flowplay::flow::ConvDesign::default(),
            size: 4,
            layers: 3,
            width: 5,
            depth: k % 3, // 0, 1 and 2 residual blocks
            stack,
            z2: false,
        };
        let label = format!("lattice {:?} depth {}", spec.stack.layers(), spec.depth);
        assert_parity(&label, spec, &target, 7, &mut rng);
    }
}

#[test]
fn gpu_z2_lattice_flows_match_the_cpu() {
    let mut rng = Rng::seeded(32);
    for (size, family, depth, target) in [
        (4, Family::Sinh, 1, phi4(4, -4.0, 2.0)),
        (4, Family::CubicRational, 2, phi4(4, -4.0, 2.0)),
        (6, Family::Cubic, 1, phi4(6, 1.0, 0.5)),
        (4, Family::Affine, 0, phi4(4, -4.0, 8.0)),
        // more sites than a workgroup has threads
        (12, Family::Sinh, 1, phi4(12, -4.0, 2.0)),
    ] {
        let spec = LatticeSpec {
            conv: flowplay::flow::ConvDesign::default(),
            size,
            layers: 2,
            width: 6,
            depth,
            stack: Stack::uniform(family, 2),
            z2: true,
        };
        let label = format!("lattice Z2 L={size} {family:?}");
        assert_parity(&label, spec, &target, 5, &mut rng);
    }
}

/// GPU steps lower the reverse KL as the CPU's do, and a Z2 flow trained on
/// the GPU stays exactly odd: x_from_z(-z) = -x_from_z(z).
#[test]
fn gpu_lattice_training_lowers_the_loss_and_keeps_z2() {
    let mut rng = Rng::seeded(33);
    let target = phi4(4, -4.0, 2.0);
    let spec = LatticeSpec {
        conv: flowplay::flow::ConvDesign::default(),
        size: 4,
        layers: 4,
        width: 8,
        depth: 1,
        stack: Stack::uniform(Family::Sinh, 1),
        z2: true,
    };
    let flow = LatticeFlow::<f64>::init(spec.clone(), &mut rng).unwrap();
    let mut train = settings(64);
    train.learning_rate = 3e-3;
    let mut gpu = GpuTrainer::new(context(), FlowModel::Lattice(flow), target, train).unwrap();
    let first: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    let losses = pollster::block_on(gpu.steps_async(150)).unwrap();
    assert_eq!(losses.len(), 150);
    let last: f64 = (0..5).map(|_| gpu.step().unwrap()).sum::<f64>() / 5.0;
    assert!(last < first - 1.0, "loss {first} -> {last}");
    assert_eq!(gpu.steps_done(), 160);
    let FlowModel::Lattice(trained) = gpu.model() else {
        panic!("the GPU trainer returned another kind of flow")
    };
    assert_eq!(trained.spec, spec);
    // a dispatch a layer forward, two backward, the loss, the batch sum, Adam
    assert_eq!(gpu.dispatches_per_step(), 3 * spec.layers + 3);
    let z: Vec<f64> = (0..16).map(|_| rng.normal()).collect();
    let minus: Vec<f64> = z.iter().map(|v| -v).collect();
    let (mut x, mut y, mut ld) = (vec![0.0; 16], vec![0.0; 16], vec![0.0; 1]);
    trained.x_from_z(&z, &mut x, &mut ld);
    trained.x_from_z(&minus, &mut y, &mut ld);
    for (a, b) in x.iter().zip(&y) {
        assert!((a + b).abs() < 1e-9, "{a} vs {b}");
    }
}

/// A step that overflows stops with NonFinite and keeps the state before it;
/// what the GPU cannot train is refused with a reason.
#[test]
fn gpu_lattice_divergence_and_refusals() {
    let mut rng = Rng::seeded(34);
    let target = phi4(4, -4.0, 8.0);
    let spec = LatticeSpec {
        conv: flowplay::flow::ConvDesign::default(),
        size: 4,
        layers: 2,
        width: 4,
        depth: 1,
        stack: Stack::uniform(Family::Affine, 1),
        z2: false,
    };
    let mut flow = LatticeFlow::<f64>::init(spec.clone(), &mut rng).unwrap();
    // the last output bias is the last layer's shift t: 1e10 makes phi^4 overflow
    let n = flow.params().len();
    flow.params_mut()[n - 1] = 1e10;
    let before: Vec<f64> = flow.params().iter().map(|&v| (v as f32) as f64).collect();
    let mut gpu = GpuTrainer::new(
        context(),
        FlowModel::Lattice(flow.clone()),
        target.clone(),
        settings(16),
    )
    .unwrap();
    match gpu.step() {
        Err(TrainError::NonFinite { step: 1 }) => {}
        other => panic!("expected a non-finite step, got {other:?}"),
    }
    assert_eq!(gpu.model().as_flow().params(), &before[..]);
    let refusals = [
        (phi4(6, -4.0, 8.0), settings(16), "lattice"),
        (Target::Moons, settings(16), "phi^4"),
        (target.clone(), settings(50_000_000), "smaller batch"),
        (
            target,
            TrainSettings {
                loss: Loss::ForwardKl,
                ..settings(16)
            },
            "reverse KL",
        ),
    ];
    for (t, s, why) in refusals {
        match GpuTrainer::new(context(), FlowModel::Lattice(flow.clone()), t, s) {
            Err(e) => assert!(e.to_string().contains(why), "{e}"),
            Ok(_) => panic!("expected a refusal naming '{why}'"),
        }
    }
    // a conditioner design the kernels do not run: the CPU trains it
    let plain = LatticeSpec {
        conv: flowplay::flow::ConvDesign {
            channels: Some(vec![4, 4]),
            ..flowplay::flow::ConvDesign::default()
        },
        ..spec
    };
    let plain = LatticeFlow::<f64>::init(plain, &mut rng).unwrap();
    match GpuTrainer::new(
        context(),
        FlowModel::Lattice(plain),
        phi4(4, -4.0, 8.0),
        settings(16),
    ) {
        Err(e) => assert!(
            e.to_string()
                .contains("other conditioners train on the CPU"),
            "{e}"
        ),
        Ok(_) => panic!("expected the plain conditioner refused"),
    }
}
