//! The WGSL scalar bijections against the float64 CPU reference, run through
//! wgpu (lavapipe on machines without a GPU). No adapter is a failure, not a skip.
#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]

use flowplay::bijection::{Family, Scalar};
use flowplay::gpu::{GpuContext, ScalarEval};
use flowplay::rng::Rng;

fn context() -> GpuContext {
    match GpuContext::new_blocking() {
        Ok(ctx) => ctx,
        Err(e) => panic!("the GPU tests need an adapter: {e}"),
    }
}

#[test]
fn wgsl_scalar_families_match_the_cpu_reference() {
    let ctx = context();
    eprintln!("adapter: {} ({})", ctx.adapter_name, ctx.backend);
    let kernel = ScalarEval::new(&ctx);
    let mut rng = Rng::seeded(3);
    let mut points: Vec<f32> = vec![0.0, 1e-6, -1e-6, 0.3, -2.0, 7.5];
    for e in -2..=6 {
        for m in [1.0f32, 3.0] {
            points.push(m * 10f32.powi(e));
            points.push(-m * 10f32.powi(e));
        }
    }
    let mut checked = 0;
    let spline = Family::Spline(flowplay::bijection::SplineShape {
        bins: 7,
        bound: 4.0,
    });
    let families = [
        Family::CubicRational,
        Family::Sinh,
        Family::Cubic,
        Family::Affine,
        spline,
    ];
    for family in families {
        for trial in 0..40 {
            let spread = if trial % 2 == 0 { 1.0 } else { 3.0 };
            let raw32: Vec<f32> = (0..family.n_raw())
                .map(|_| (spread * rng.normal()) as f32)
                .collect();
            let raw64: Vec<f64> = raw32.iter().map(|&v| v as f64).collect();
            let reference = Scalar::<f64>::from_raw(family, &raw64);
            for sampling in [true, false] {
                let got = kernel
                    .run(&ctx, family, &raw32, &points, sampling)
                    .expect("kernel runs");
                for (&p, &(y, ld)) in points.iter().zip(&got) {
                    let (y_ref, ld_ref) = if sampling {
                        reference.x_from_z(p as f64)
                    } else {
                        reference.z_from_x(p as f64)
                    };
                    // Float32 conditioning: a few ulps of the input pulled through the
                    // map's slope, plus ulps of the output.
                    let slope = if sampling {
                        ld_ref.exp()
                    } else {
                        (-ld_ref).exp()
                    };
                    let tol = 1e-4 * (y_ref.abs() + slope * (p.abs() as f64) + 1.0);
                    assert!(
                        y.is_finite() && (y as f64 - y_ref).abs() <= tol,
                        "{family:?} raw {raw32:?} sampling={sampling}: f({p}) = {y}, reference {y_ref}"
                    );
                    assert!(
                        (ld as f64 - ld_ref).abs() <= 1e-3 * (1.0 + ld_ref.abs()),
                        "{family:?} raw {raw32:?} sampling={sampling}: log f'({p}) = {ld}, reference {ld_ref}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, families.len() * 40 * 2 * points.len());
}

#[test]
fn unsupported_shapes_and_wrong_parameter_counts_are_refused_clearly() {
    let ctx = context();
    let kernel = ScalarEval::new(&ctx);
    let spline = Family::Spline(flowplay::bijection::SplineShape {
        bins: 20,
        bound: 3.0,
    });
    let err = kernel
        .run(&ctx, spline, &[0.0; 59], &[1.0], true)
        .unwrap_err();
    assert!(err.to_string().contains("16 bins"), "{err}");
    let err = kernel
        .run(&ctx, Family::Cubic, &[0.0; 3], &[1.0], true)
        .unwrap_err();
    assert!(err.to_string().contains("takes 4 raw parameters"), "{err}");
}

/// A GPU error (here: WGSL that does not compile) surfaces as an error value
/// with the reason, not a panic.
#[test]
fn gpu_errors_are_reported_not_panics() {
    let ctx = context();
    let pipeline = ctx.pipeline_at(
        "broken",
        "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_name; }",
        "main",
    );
    let out = ctx.storage("out", &[0u8; 16], true);
    let _ = pipeline; // the pipeline is invalid; using it only adds errors
    let err = ctx.read_back(&out).unwrap_err();
    assert!(
        err.to_string().contains("the GPU reported an error"),
        "{err}"
    );
    assert!(ctx.error().is_some());
}
