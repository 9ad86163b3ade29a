//! The browser check of the GPU kernels: the same WGSL runs under WebGPU in
//! headless Chromium (SwiftShader), and one training step of a radial and a
//! coupling flow matches the CPU path, as does a lattice flow's gradient on
//! the phi^4 field. Browsers compile WGSL with their own
//! compiler (Tint), which rejects some code naga accepts; this catches it.
//!
//! Run by `scripts/test.sh` with wasm-bindgen-test-runner and chromedriver
//! (webdriver.json gives Chromium its WebGPU flags).
#![cfg(all(target_arch = "wasm32", feature = "gpu"))]

use flowplay::bijection::{Family, Stack};
use flowplay::flow::{
    CouplingFlow, CouplingSpec, Flow, FlowModel, RadialConditioner, RadialFlow, RadialSpec,
};
use flowplay::gpu::{GpuContext, GpuTrainer};
use flowplay::rng::Rng;
use flowplay::target::Target;
use flowplay::train::{CpuTrainer, Loss, TrainSettings, Trainer};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

mod gpu_common;
use gpu_common::{assert_display_matches_cpu, assert_matches_cpu, cpu_forward_kl, rounded_to_f32};

wasm_bindgen_test_configure!(run_in_browser);

async fn context() -> GpuContext {
    match GpuContext::new().await {
        Ok(ctx) => ctx,
        Err(e) => panic!("no WebGPU adapter (Chromium needs --enable-unsafe-webgpu): {e}"),
    }
}

fn models() -> Vec<(&'static str, FlowModel<f64>)> {
    let mut rng = Rng::seeded(3);
    let radial = RadialSpec {
        dim: 2,
        stack: Stack::uniform(Family::Cubic, 8),
        conditioner: RadialConditioner::Fourier { order: 2 },
    };
    let mut radial =
        RadialFlow::<f64>::init(radial, Some(&[0.1, -0.2]), Some(&[0.0, 0.1]), &mut rng)
            .expect("valid radial flow");
    for v in radial.params_mut().iter_mut().skip(4) {
        *v += 0.1 * rng.normal();
    }
    let coupling = CouplingSpec {
        dim: 2,
        layers: 3,
        width: 20,
        depth: 2,
        stack: Stack::uniform(Family::CubicRational, 2),
    };
    let mut coupling = CouplingFlow::<f64>::init(coupling, &mut rng).expect("valid coupling flow");
    for v in coupling.params_mut() {
        *v += 0.05 * rng.normal();
    }
    vec![
        ("radial-fourier", rounded_to_f32(FlowModel::Radial(radial))),
        ("coupling", rounded_to_f32(FlowModel::Coupling(coupling))),
    ]
}

#[wasm_bindgen_test]
async fn webgpu_training_step_matches_the_cpu() {
    let batch = 48;
    let target = Target::Moons;
    let settings = TrainSettings {
        batch,
        learning_rate: 1e-2,
        seed: 5,
        loss: Loss::ForwardKl,
        threads: 1,
    };
    for (label, model) in models() {
        let mut gpu = GpuTrainer::new(
            context().await,
            model.clone(),
            target.clone(),
            settings.clone(),
        )
        .expect("GPU trainer");
        // Loss and every gradient on one batch, against float64.
        let points: Vec<f32> = target
            .sample(batch, &mut Rng::seeded(9))
            .expect("samples")
            .iter()
            .map(|&v| v as f32)
            .collect();
        let points64: Vec<f64> = points.iter().map(|&v| v as f64).collect();
        let (loss_gpu, grad_gpu) = gpu
            .loss_and_grad_async(&points)
            .await
            .expect("GPU gradient");
        let (loss_cpu, grad_cpu) = cpu_forward_kl(model.as_flow(), &points64);
        assert_matches_cpu(label, loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
        // The display kernels.
        let pushed = gpu.x_from_z_async(&points).await.expect("x_from_z");
        let log_q = gpu.log_q_async(&points).await.expect("log q");
        assert_display_matches_cpu(label, model.as_flow(), &points, &pushed, &points, &log_q);
        // One training step: both backends draw the same batch from the seed.
        let mut cpu = CpuTrainer::<f64>::new(model.clone(), target.clone(), settings.clone())
            .expect("CPU trainer");
        let step_cpu = cpu.step().expect("CPU step");
        let step_gpu = gpu.step_async().await.expect("GPU step");
        assert!(
            (step_gpu - step_cpu).abs() <= 1e-4 * step_cpu.abs().max(1.0),
            "{label}: step loss {step_gpu} vs {step_cpu}"
        );
        // Adam's first step moves each parameter by the learning rate against
        // the sign of its gradient: compare where the gradient is clearly nonzero.
        let after_gpu = gpu.model_async().await;
        let after_cpu = cpu.model();
        let scale = grad_cpu.iter().fold(0.0f64, |m, g| m.max(g.abs()));
        let mut compared = 0;
        for (k, ((g, c), grad)) in after_gpu
            .as_flow()
            .params()
            .iter()
            .zip(after_cpu.as_flow().params())
            .zip(&grad_cpu)
            .enumerate()
        {
            if grad.abs() > 0.05 * scale {
                compared += 1;
                assert!(
                    (g - c).abs() <= 1e-5 + 1e-6 * c.abs(),
                    "{label}: param[{k}] {g} vs {c}"
                );
            }
        }
        assert!(compared > 0, "{label}: no parameter compared");
    }
}

/// The phi^4 lab's kernels under the browser's WGSL compiler: a Z2 lattice
/// coupling flow's reverse-KL loss and every gradient entry, and its pushed
/// fields and log q, against the float64 CPU reference.
#[wasm_bindgen_test]
async fn webgpu_lattice_flow_matches_the_cpu() {
    use flowplay::flow::{LatticeFlow, LatticeSpec};
    use flowplay::target::phi4::{Couplings, Phi4};
    let mut rng = Rng::seeded(4);
    let spec = LatticeSpec {
        conv: flowplay::flow::ConvDesign::default(),
        size: 4,
        layers: 2,
        width: 6,
        depth: 1,
        stack: Stack::uniform(Family::Sinh, 1),
        z2: true,
    };
    let mut flow = LatticeFlow::<f64>::init(spec, &mut rng).expect("valid lattice flow");
    for v in flow.params_mut() {
        *v += 0.05 * rng.normal();
    }
    let model = rounded_to_f32(FlowModel::Lattice(flow));
    let phi4 = Phi4::new(
        4,
        Couplings {
            m2: -4.0,
            lambda: 2.0,
        },
    )
    .expect("valid couplings");
    let target = Target::Phi4(phi4);
    let batch = 6;
    let settings = TrainSettings {
        batch,
        learning_rate: 1e-3,
        seed: 5,
        loss: Loss::ReverseKl,
        threads: 1,
    };
    let mut gpu = GpuTrainer::new(context().await, model.clone(), target.clone(), settings)
        .expect("GPU trainer");
    let z: Vec<f32> = (0..batch * 16).map(|_| rng.normal() as f32).collect();
    let z64: Vec<f64> = z.iter().map(|&v| v as f64).collect();
    let (loss_gpu, grad_gpu) = gpu.loss_and_grad_async(&z).await.expect("GPU gradient");
    let (loss_cpu, grad_cpu) = gpu_common::cpu_reverse_kl(model.as_flow(), &target, &z64);
    assert_matches_cpu("lattice Z2", loss_gpu, &grad_gpu, loss_cpu, &grad_cpu);
    let pushed = gpu.x_from_z_async(&z).await.expect("x_from_z");
    let fields: Vec<f32> = pushed.chunks(17).flat_map(|p| p[..16].to_vec()).collect();
    let log_q = gpu.log_q_async(&fields).await.expect("log q");
    assert_display_matches_cpu("lattice Z2", model.as_flow(), &z, &pushed, &fields, &log_q);
}
