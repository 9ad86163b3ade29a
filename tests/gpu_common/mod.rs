//! What the GPU parity tests share: the adapter (no adapter is a failure), the
//! float64 CPU reference of both losses, and the comparison of loss and gradient.
#![allow(dead_code)] // each test file uses its part

use flowplay::flow::{Flow, FlowModel};
#[cfg(not(target_arch = "wasm32"))]
use flowplay::gpu::GpuContext;
use flowplay::stats::log_normal;
use flowplay::target::Target;

#[cfg(not(target_arch = "wasm32"))]
pub fn context() -> GpuContext {
    match GpuContext::new_blocking() {
        Ok(ctx) => ctx,
        Err(e) => panic!("the GPU tests need an adapter: {e}"),
    }
}

/// The model with exactly the float32 parameters the GPU holds (the CPU
/// reference then differs only in arithmetic).
pub fn rounded_to_f32(model: FlowModel<f64>) -> FlowModel<f64> {
    model.cast::<f32>().cast::<f64>()
}

/// Forward KL: mean -log q at `points` and its gradient, on the CPU in float64.
pub fn cpu_forward_kl(flow: &dyn Flow<f64>, points: &[f64]) -> (f64, Vec<f64>) {
    let d = flow.dim();
    let n = points.len() / d;
    let inv_n = 1.0 / n as f64;
    let mut z = vec![0.0; points.len()];
    let mut ld = vec![0.0; n];
    let mut grad = vec![0.0; flow.n_params()];
    let adjoint = |_: usize, zi: &[f64], _: f64, bar: &mut [f64]| {
        for (b, v) in bar.iter_mut().zip(zi) {
            *b = v * inv_n;
        }
        -inv_n
    };
    flow.z_from_x_grad(points, &adjoint, &mut z, &mut ld, &mut grad);
    let loss = (0..n)
        .map(|i| -(log_normal(&z[i * d..(i + 1) * d]) + ld[i]))
        .sum::<f64>()
        * inv_n;
    (loss, grad)
}

/// Reverse KL against an energy: mean(log N(z) - log det - log p~(x)) at
/// latent `z` and its gradient, on the CPU in float64.
pub fn cpu_reverse_kl(flow: &dyn Flow<f64>, target: &Target, z: &[f64]) -> (f64, Vec<f64>) {
    let d = flow.dim();
    let n = z.len() / d;
    let inv_n = 1.0 / n as f64;
    let mut x = vec![0.0; z.len()];
    let mut ld = vec![0.0; n];
    let mut grad = vec![0.0; flow.n_params()];
    let adjoint = |_: usize, xi: &[f64], _: f64, bar: &mut [f64]| {
        let (_, g) = target.log_density_grad(xi).unwrap();
        for (b, gj) in bar.iter_mut().zip(&g) {
            *b = -gj * inv_n;
        }
        -inv_n
    };
    flow.x_from_z_grad(z, &adjoint, &mut x, &mut ld, &mut grad);
    let loss = (0..n)
        .map(|i| {
            log_normal(&z[d * i..d * (i + 1)])
                - ld[i]
                - target.log_density_grad(&x[d * i..d * (i + 1)]).unwrap().0
        })
        .sum::<f64>()
        * inv_n;
    (loss, grad)
}

/// Loss to 1e-4 relative; every gradient entry to 1e-3 relative, with a floor of
/// 1e-4 of the largest entry.
pub fn assert_matches_cpu(
    label: &str,
    loss_gpu: f64,
    grad_gpu: &[f64],
    loss_cpu: f64,
    grad_cpu: &[f64],
) {
    assert!(
        (loss_gpu - loss_cpu).abs() <= 1e-4 * loss_cpu.abs().max(1.0),
        "{label}: loss {loss_gpu} vs {loss_cpu}"
    );
    assert_eq!(grad_gpu.len(), grad_cpu.len(), "{label}: gradient length");
    let scale = grad_cpu.iter().fold(0.0f64, |m, g| m.max(g.abs()));
    for (k, (g, c)) in grad_gpu.iter().zip(grad_cpu).enumerate() {
        assert!(
            (g - c).abs() <= 1e-3 * c.abs() + 1e-4 * scale,
            "{label}: grad[{k}] {g} vs {c} (largest {scale})"
        );
    }
}

/// Pushed points (x, log det per point) and log q against the CPU, to 1e-4
/// relative.
pub fn assert_display_matches_cpu(
    label: &str,
    flow: &dyn Flow<f64>,
    latent: &[f32],
    pushed: &[f32],
    points: &[f32],
    log_q: &[f32],
) {
    let d = flow.dim();
    let latent64: Vec<f64> = latent.iter().map(|&v| v as f64).collect();
    let n = latent.len() / d;
    let mut x_cpu = vec![0.0; latent64.len()];
    let mut ld_cpu = vec![0.0; n];
    flow.x_from_z(&latent64, &mut x_cpu, &mut ld_cpu);
    assert_eq!(pushed.len(), n * (d + 1), "{label}: pushed length");
    for i in 0..n {
        for j in 0..d {
            let (g, c) = (pushed[i * (d + 1) + j] as f64, x_cpu[i * d + j]);
            assert!(
                (g - c).abs() <= 1e-4 * c.abs().max(1.0),
                "{label}: x_from_z {g} vs {c}"
            );
        }
        let (g, c) = (pushed[i * (d + 1) + d] as f64, ld_cpu[i]);
        assert!(
            (g - c).abs() <= 1e-4 * c.abs().max(1.0),
            "{label}: log det {g} vs {c}"
        );
    }
    let points64: Vec<f64> = points.iter().map(|&v| v as f64).collect();
    let lq_cpu = flowplay::train::metrics::log_q(flow, &points64);
    assert_eq!(log_q.len(), lq_cpu.len(), "{label}: log q length");
    for (g, c) in log_q.iter().zip(&lq_cpu) {
        assert!(
            (*g as f64 - c).abs() <= 1e-4 * c.abs().max(1.0),
            "{label}: log q {g} vs {c}"
        );
    }
}
