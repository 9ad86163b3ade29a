//! One table of every bijection (all families, the baselines, stacks, radial,
//! coupling, element-wise) and the same checks over all of it, in float64:
//! round trip, log-det against a finite-difference Jacobian, gradients of every
//! raw parameter against finite differences, monotonicity — with property-based
//! parameters and points (proptest).

use flowplay::bijection::{Family, Scalar, SplineShape, Stack};
use flowplay::flow::{
    Activation, ConvDesign, CouplingFlow, CouplingSpec, ElementwiseFlow, Flow, LatticeFlow,
    LatticeSpec, RadialConditioner, RadialFlow, RadialSpec,
};
use flowplay::rng::Rng;
use proptest::prelude::*;

/// Every scalar bijection: each family, a wide spline, uniform and mixed stacks.
fn scalar_table() -> Vec<(&'static str, Stack)> {
    vec![
        ("cubic_rational", Stack::uniform(Family::CubicRational, 1)),
        ("sinh", Stack::uniform(Family::Sinh, 1)),
        ("cubic", Stack::uniform(Family::Cubic, 1)),
        ("affine", Stack::uniform(Family::Affine, 1)),
        (
            "spline",
            Stack::uniform(Family::Spline(SplineShape::default()), 1),
        ),
        (
            "spline-4-on-2",
            Stack::uniform(
                Family::Spline(SplineShape {
                    bins: 4,
                    bound: 2.0,
                }),
                1,
            ),
        ),
        ("stack-8-cubic", Stack::uniform(Family::Cubic, 8)),
        (
            "stack-8-cubic_rational",
            Stack::uniform(Family::CubicRational, 8),
        ),
        ("stack-8-sinh", Stack::uniform(Family::Sinh, 8)),
        (
            "mixed",
            Stack::mixed(vec![
                Family::CubicRational,
                Family::Sinh,
                Family::Cubic,
                Family::Affine,
                Family::Spline(SplineShape::default()),
            ]),
        ),
    ]
}

/// Raw parameters spread well away from the identity init.
fn random_raw(stack: &Stack, rng: &mut Rng, spread: f64) -> Vec<f64> {
    stack
        .default_raw(&mut || rng.normal())
        .into_iter()
        .map(|v| v + spread * rng.normal())
        .collect()
}

/// Every flow of the project, with perturbed parameters.
fn flow_table(seed: u64) -> Vec<(String, Box<dyn Flow<f64>>)> {
    let mut rng = Rng::seeded(seed);
    let mut out: Vec<(String, Box<dyn Flow<f64>>)> = Vec::new();
    for (name, stack) in scalar_table() {
        for dim in [2, 3] {
            let spec = RadialSpec {
                dim,
                stack: stack.clone(),
                conditioner: RadialConditioner::Direct,
            };
            let mut f = RadialFlow::<f64>::init(spec, None, None, &mut rng).expect("valid");
            perturb(f.params_mut(), &mut rng, 0.4);
            out.push((format!("radial-{dim}d-{name}"), Box::new(f)));
        }
        let spec = RadialSpec {
            dim: 2,
            stack: stack.clone(),
            conditioner: RadialConditioner::Fourier { order: 3 },
        };
        let mut f =
            RadialFlow::<f64>::init(spec, Some(&[0.3, -0.2]), None, &mut rng).expect("valid");
        perturb(f.params_mut(), &mut rng, 0.3);
        out.push((format!("radial-fourier-{name}"), Box::new(f)));
        for dim in [2, 3] {
            let spec = CouplingSpec {
                dim,
                layers: 3,
                width: 6,
                depth: 2,
                stack: stack.clone(),
            };
            let mut f = CouplingFlow::<f64>::init(spec, &mut rng).expect("valid");
            // Moderate, and less for deep stacks: compounded layers reach log-dets of
            // -15 and beyond, where finite differences cannot serve as a reference.
            let spread = 0.1 * (3.0 / stack.n_raw() as f64).sqrt().min(1.0);
            perturb(f.params_mut(), &mut rng, spread);
            out.push((format!("coupling-{dim}d-{name}"), Box::new(f)));
        }
        let mut f = ElementwiseFlow::<f64>::init(2, stack.clone(), &mut rng).expect("valid");
        perturb(f.params_mut(), &mut rng, 0.4);
        out.push((format!("elementwise-{name}"), Box::new(f)));
        for (design, z2, conv) in lattice_designs() {
            // the variations on small stacks (finite differences of every
            // parameter), the 5 x 5 kernel on the smallest
            let most_raw = match conv.kernel {
                3 if conv == ConvDesign::default() => usize::MAX,
                3 => 5,
                _ => 3,
            };
            if z2 && stack.odd_raw().is_none() || stack.n_raw() > most_raw {
                continue;
            }
            let spec = LatticeSpec {
                size: 4,
                layers: 2,
                width: 2,
                depth: 1,
                stack: stack.clone(),
                z2,
                conv,
            };
            let mut f = LatticeFlow::<f64>::init(spec, &mut rng).expect("valid");
            let spread = 0.1 * (3.0 / stack.n_raw() as f64).sqrt().min(1.0);
            perturb(f.params_mut(), &mut rng, spread);
            out.push((format!("{design}-{name}"), Box::new(f)));
        }
    }
    out
}

/// The lattice conditioners: the residual default, plain or Z2, and the
/// literature's variations (a channel list, other kernels, activations and a
/// bounded head).
fn lattice_designs() -> Vec<(&'static str, bool, ConvDesign)> {
    let plain = ConvDesign {
        kernel: 3,
        activation: Activation::LeakyRelu,
        channels: Some(vec![3, 2]),
        head_bound: 2.0,
    };
    let tanh_5x5 = ConvDesign {
        kernel: 5,
        activation: Activation::Tanh,
        channels: Some(vec![2]),
        head_bound: 0.0,
    };
    vec![
        ("lattice", false, ConvDesign::default()),
        ("lattice-z2", true, ConvDesign::default()),
        ("lattice-plain-leaky-bounded", false, plain.clone()),
        ("lattice-z2-plain-leaky-bounded", true, plain),
        ("lattice-5x5-tanh", false, tanh_5x5),
    ]
}

fn perturb(p: &mut [f64], rng: &mut Rng, spread: f64) {
    for v in p {
        *v += spread * rng.normal();
    }
}

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= abs + rel * a.abs().max(b.abs())
}

fn log_abs_det(m: &mut [f64], d: usize) -> f64 {
    let mut ld = 0.0;
    for c in 0..d {
        let p = (c..d)
            .max_by(|&i, &j| m[i * d + c].abs().total_cmp(&m[j * d + c].abs()))
            .unwrap_or(c);
        for k in 0..d {
            m.swap(c * d + k, p * d + k);
        }
        let piv = m[c * d + c];
        ld += piv.abs().ln();
        for i in c + 1..d {
            let f = m[i * d + c] / piv;
            for k in c..d {
                m[i * d + k] -= f * m[c * d + k];
            }
        }
    }
    ld
}

/// Runs one direction of a flow on one point.
fn apply(flow: &dyn Flow<f64>, sampling: bool, p: &[f64]) -> (Vec<f64>, f64) {
    let mut out = vec![0.0; p.len()];
    let mut ld = [0.0];
    if sampling {
        flow.x_from_z(p, &mut out, &mut ld);
    } else {
        flow.z_from_x(p, &mut out, &mut ld);
    }
    (out, ld[0])
}

/// Loss sum_i a_i . out_i + b_i ld_i and its parameter gradient.
fn weighted(
    flow: &dyn Flow<f64>,
    sampling: bool,
    pts: &[f64],
    a: &[f64],
    b: &[f64],
) -> (f64, Vec<f64>) {
    let d = flow.dim();
    let n = pts.len() / d;
    let mut out = vec![0.0; pts.len()];
    let mut ld = vec![0.0; n];
    let mut grad = vec![0.0; flow.n_params()];
    let adjoint = |i: usize, _p: &[f64], _l: f64, bar: &mut [f64]| {
        bar.copy_from_slice(&a[i * d..(i + 1) * d]);
        b[i]
    };
    if sampling {
        flow.x_from_z_grad(pts, &adjoint, &mut out, &mut ld, &mut grad);
    } else {
        flow.z_from_x_grad(pts, &adjoint, &mut out, &mut ld, &mut grad);
    }
    let loss = out.iter().zip(a).map(|(o, w)| o * w).sum::<f64>()
        + ld.iter().zip(b).map(|(l, w)| l * w).sum::<f64>();
    (loss, grad)
}

fn check_flow(
    name: &str,
    flow: &mut Box<dyn Flow<f64>>,
    rng: &mut Rng,
) -> Result<(), TestCaseError> {
    let d = flow.dim();
    let n = 3;
    let pts: Vec<f64> = (0..n * d).map(|_| 1.5 * rng.normal()).collect();
    for sampling in [true, false] {
        let dir = if sampling { "x_from_z" } else { "z_from_x" };
        for i in 0..n {
            let p = &pts[i * d..(i + 1) * d];
            // Round trip.
            let (q, ld) = apply(flow.as_ref(), sampling, p);
            let (back, ld_back) = apply(flow.as_ref(), !sampling, &q);
            for j in 0..d {
                prop_assert!(
                    close(back[j], p[j], 1e-7, 1e-7),
                    "{name} {dir}: round trip {back:?} vs {p:?}"
                );
            }
            prop_assert!(
                close(ld, -ld_back, 1e-7, 1e-7),
                "{name} {dir}: log-dets {ld} vs {ld_back}"
            );
            // Log-det against a finite-difference Jacobian, taken in whichever
            // direction expands (a contracting map's determinant is a small
            // difference of O(1) entries, which finite differences cannot resolve).
            let (fd_sampling, fd_point, sign) = if ld >= 0.0 {
                (sampling, p, 1.0)
            } else {
                (!sampling, &q[..], -1.0)
            };
            let h = 1e-6;
            let mut jac = vec![0.0; d * d];
            for k in 0..d {
                let mut pp = fd_point.to_vec();
                let mut pm = fd_point.to_vec();
                pp[k] += h;
                pm[k] -= h;
                let (qp, _) = apply(flow.as_ref(), fd_sampling, &pp);
                let (qm, _) = apply(flow.as_ref(), fd_sampling, &pm);
                for r in 0..d {
                    jac[r * d + k] = (qp[r] - qm[r]) / (2.0 * h);
                }
            }
            let fd = sign * log_abs_det(&mut jac, d);
            prop_assert!(
                close(ld, fd, 1e-5, 1e-6),
                "{name} {dir}: log_det {ld} vs finite differences {fd} at {p:?}"
            );
        }
        // Gradients of every parameter against finite differences.
        let a: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
        let b: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let (_, grad) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
        let params = flow.params().to_vec();
        let h = 1e-6;
        for k in 0..params.len() {
            flow.params_mut()[k] = params[k] + h;
            let (lp, _) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
            flow.params_mut()[k] = params[k] - h;
            let (lm, _) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
            flow.params_mut()[k] = params[k];
            let fd = (lp - lm) / (2.0 * h);
            if !close(grad[k], fd, 1e-4, 1e-6) {
                // A step across a spline knot (where f'' jumps) spoils one step
                // size; the gradient must then match at another.
                let h2 = 1e-8;
                flow.params_mut()[k] = params[k] + h2;
                let (lp, _) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
                flow.params_mut()[k] = params[k] - h2;
                let (lm, _) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
                flow.params_mut()[k] = params[k];
                let fd2 = (lp - lm) / (2.0 * h2);
                prop_assert!(
                    close(grad[k], fd2, 1e-4, 1e-6),
                    "{name} {dir}: d/dparam[{k}] {} vs finite differences {fd} (h = 1e-6), {fd2} (h = 1e-8)",
                    grad[k]
                );
            }
        }
    }
    Ok(())
}

/// d f / d raw and d log f' / d raw of a stack at x against finite differences.
fn check_raw_partials(name: &str, stack: &Stack, raw: &[f64], x: f64) -> Result<(), TestCaseError> {
    let mut built = Vec::new();
    stack.build(raw, &mut built);
    let mut trace = vec![0.0; stack.len()];
    let (y, _) = Stack::x_from_z_trace(&built, x, &mut trace);
    for (x_bar, ld_bar) in [(1.0, 0.0), (0.0, 1.0)] {
        let mut grad = vec![0.0; raw.len()];
        stack.x_from_z_backward(&built, &trace, y, x_bar, ld_bar, &mut grad);
        for k in 0..raw.len() {
            let eval = |delta: f64| {
                let mut r = raw.to_vec();
                r[k] += delta;
                let mut b = Vec::new();
                stack.build(&r, &mut b);
                let (y, l) = Stack::x_from_z(&b, x);
                x_bar * y + ld_bar * l
            };
            let h = 1e-6;
            let fd = (eval(h) - eval(-h)) / (2.0 * h);
            prop_assert!(
                close(grad[k], fd, 1e-5, 1e-7),
                "{name}: d({x_bar} f + {ld_bar} log f')/d raw[{k}] at {x}: {} vs {fd}",
                grad[k]
            );
        }
    }
    Ok(())
}

/// A batch gives exactly what its points give one at a time (outputs, log-dets,
/// and the summed gradient), whatever blocking a flow uses inside.
#[test]
fn batches_agree_with_single_points() {
    let mut rng = Rng::seeded(11);
    for (name, flow) in flow_table(5) {
        let d = flow.dim();
        let n = 19;
        let pts: Vec<f64> = (0..n * d).map(|_| 1.5 * rng.normal()).collect();
        let a: Vec<f64> = (0..n * d).map(|_| rng.normal()).collect();
        let b: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        for sampling in [true, false] {
            let (_, grad) = weighted(flow.as_ref(), sampling, &pts, &a, &b);
            let mut summed = vec![0.0; grad.len()];
            let mut out = vec![0.0; n * d];
            let mut ld = vec![0.0; n];
            if sampling {
                flow.x_from_z(&pts, &mut out, &mut ld);
            } else {
                flow.z_from_x(&pts, &mut out, &mut ld);
            }
            for i in 0..n {
                let p = &pts[i * d..(i + 1) * d];
                let (q, l) = apply(flow.as_ref(), sampling, p);
                assert_eq!(&q[..], &out[i * d..(i + 1) * d], "{name}");
                assert_eq!(l, ld[i], "{name}");
                let (_, g) = weighted(
                    flow.as_ref(),
                    sampling,
                    p,
                    &a[i * d..(i + 1) * d],
                    &b[i..=i],
                );
                for (s, v) in summed.iter_mut().zip(g) {
                    *s += v;
                }
            }
            for (k, (g, s)) in grad.iter().zip(&summed).enumerate() {
                assert!(
                    close(*g, *s, 1e-9, 1e-12),
                    "{name}: grad[{k}] batch {g} vs summed {s}"
                );
            }
        }
    }
}

/// Checks every flow of the table whose name `part` accepts.
fn check_flows(seed: u64, part: impl Fn(&str) -> bool) -> Result<(), TestCaseError> {
    let mut rng = Rng::seeded(seed ^ 0x5eed);
    let flows = flow_table(seed).into_iter().filter(|(name, _)| part(name));
    for (name, mut flow) in flows {
        check_flow(&name, &mut flow, &mut rng)?;
    }
    Ok(())
}

proptest! {
    // A fixed seed keeps CI deterministic; set PROPTEST_RNG_SEED to explore others
    // (failures are recorded in tests/bijection_table.proptest-regressions).
    #![proptest_config(ProptestConfig {
        cases: 6,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261202),
        ),
        ..ProptestConfig::default()
    })]

    // The flow table, a part per test so the parts run on every core.
    #[test]
    fn every_radial_flow_round_trips_and_has_exact_log_det_and_gradients(seed in any::<u64>()) {
        check_flows(seed, |name| name.starts_with("radial-"))?;
    }

    #[test]
    fn every_coupling_flow_round_trips_and_has_exact_log_det_and_gradients(seed in any::<u64>()) {
        check_flows(seed, |name| name.starts_with("coupling-"))?;
    }

    #[test]
    fn every_other_flow_round_trips_and_has_exact_log_det_and_gradients(seed in any::<u64>()) {
        check_flows(seed, |name| !name.starts_with("radial-") && !name.starts_with("coupling-"))?;
    }

    #[test]
    fn every_scalar_bijection_is_monotone_with_exact_derivatives(seed in any::<u64>(), spread in 0.0f64..1.5) {
        let mut rng = Rng::seeded(seed);
        for (name, stack) in scalar_table() {
            let raw = random_raw(&stack, &mut rng, spread);
            let mut built = Vec::new();
            stack.build(&raw, &mut built);
            let mut prev = f64::NEG_INFINITY;
            for i in 0..200 {
                let x = -12.0 + 24.0 * (i as f64) / 199.0;
                let (y, logd) = Stack::x_from_z(&built, x);
                prop_assert!(y > prev, "{name}: not increasing at {x}");
                prev = y;
                let h = 1e-6;
                let fd = ((Stack::x_from_z(&built, x + h).0 - Stack::x_from_z(&built, x - h).0) / (2.0 * h)).ln();
                prop_assert!(close(logd, fd, 1e-6, 1e-6), "{name}: log f' {logd} vs {fd} at {x}");
                if i % 7 == 3 {
                    check_raw_partials(name, &stack, &raw, x)?;
                    // Differences f(x + d) - f(x) and their inverse agree with the
                    // plain forms where those do not cancel.
                    for layer in &built {
                        let y0 = layer.x_from_z(x).0;
                        for d in [0.37, -1.3, 2e-3] {
                            let plain = layer.x_from_z(x + d).0 - y0;
                            let diff = layer.x_from_z_diff(x, y0, d);
                            prop_assert!(close(diff, plain, 1e-7, 1e-10), "{name}: diff {diff} vs {plain} at {x} + {d}");
                            let back = layer.z_from_x_diff(x, y0, diff);
                            prop_assert!(close(back, d, 1e-6, 1e-9), "{name}: inverse diff {back} vs {d} at {x}");
                        }
                    }
                }
                let (back, logd_back) = Stack::z_from_x(&built, y);
                prop_assert!(close(back, x, 1e-9, 1e-9), "{name}: inverse {back} vs {x}");
                prop_assert!(close(logd_back, logd, 1e-8, 1e-8));
            }
        }
    }
}

/// Float32: for every family over the ranges its transforms allow, the inverse
/// is finite and round-trips for |x| up to 1e6 (bijx's Cardano form fails this).
#[test]
fn float32_inverse_is_finite_and_round_trips_up_to_1e6() {
    let mut rng = Rng::seeded(7);
    let mut points: Vec<f32> = vec![0.0, 1e-6, -1e-6, 0.3, -2.0];
    for e in -3..=6 {
        for m in [1.0f32, 3.0, 7.0] {
            let v = m * 10f32.powi(e);
            if v <= 1e6 {
                points.push(v);
                points.push(-v);
            }
        }
    }
    let mut checked = 0;
    for family in [Family::CubicRational, Family::Sinh, Family::Cubic] {
        for trial in 0..400 {
            // Raw values from moderate to extreme: the transforms map all of R
            // into the allowed ranges, and extreme raw values reach their edges.
            let spread = [1.0, 4.0, 12.0][trial % 3];
            let mut raw: Vec<f64> = (0..family.n_raw()).map(|_| spread * rng.normal()).collect();
            // The location parameter stays in a sensible window.
            let loc = match family {
                Family::CubicRational => 2,
                Family::Sinh => 2,
                _ => 3,
            };
            raw[loc] = 3.0 * rng.normal();
            let raw32: Vec<f32> = raw.iter().map(|&v| v as f32).collect();
            let layer32 = Scalar::<f32>::from_raw(family, &raw32);
            let layer64 = Scalar::<f64>::from_raw(
                family,
                &raw32.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            );
            for &y in &points {
                let (x, ld) = layer32.z_from_x(y);
                assert!(
                    x.is_finite() && ld.is_finite(),
                    "{family:?} raw {raw32:?}: inverse of {y} is {x}, log f' {ld}"
                );
                let (x64, _) = layer64.z_from_x(y as f64);
                // The error of x is at the conditioning limit: a few float32 ulps of y
                // pulled back through f', plus ulps of x itself.
                let slope = layer64.x_from_z(x64).1.exp();
                let c = layer64.constrained()[loc].abs();
                let tol = 16.0
                    * f32::EPSILON as f64
                    * ((y.abs() as f64 + c) / slope + c + x64.abs() + 1.0);
                assert!(
                    ((x as f64) - x64).abs() <= tol,
                    "{family:?} raw {raw32:?}: f32 inverse of {y} = {x}, f64 {x64}"
                );
                // f32 both ways: the forward map's own rounding (e.g. the
                // cancellation inside sinh's e^nu sinh(a) + beta) bounds this.
                let (y_back, _) = layer32.x_from_z(x);
                // Its error is a few ulps of the input scale (|x|, |c| and sinh's
                // width s) times the slope.
                let params = layer64.constrained();
                let width = if family == Family::Sinh {
                    params[0]
                } else {
                    1.0
                };
                let scale = (x.abs() as f64 + params[loc].abs() + width) as f32;
                let tol_y = 2e-5 * (1.0 + y.abs()) + 16.0 * f32::EPSILON * slope as f32 * scale;
                assert!(
                    y_back.is_finite() && (y_back - y).abs() <= tol_y,
                    "{family:?} raw {raw32:?}: round trip {y} -> {x} -> {y_back}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 3 * 400 * 50);
}

/// The baselines in float32 at the same magnitudes: the affine map is exact to
/// rounding everywhere, and the spline is the identity beyond its interval.
#[test]
fn float32_baselines_invert_up_to_1e6() {
    let mut rng = Rng::seeded(8);
    for family in [Family::Affine, Family::Spline(SplineShape::default())] {
        for _ in 0..200 {
            let raw: Vec<f32> = (0..family.n_raw())
                .map(|_| (3.0 * rng.normal()) as f32)
                .collect();
            let layer = Scalar::<f32>::from_raw(family, &raw);
            for y in [0.0f32, 0.37, -4.9, 5.0, 123.0, -2.5e4, 1e6, -1e6] {
                let (x, ld) = layer.z_from_x(y);
                assert!(
                    x.is_finite() && ld.is_finite(),
                    "{family:?}: inverse of {y}"
                );
                let (y_back, _) = layer.x_from_z(x);
                // a few ulps of x, times the slope there (a spline bin can be steep)
                let tol = 1e-4 * (1.0 + y.abs()) + 8.0 * f32::EPSILON * ld.exp() * (1.0 + x.abs());
                assert!(
                    (y_back - y).abs() <= tol,
                    "{family:?} raw {raw:?}: {y} -> {x} -> {y_back}"
                );
            }
        }
    }
}

/// Sinh conjugation far from the identity: e^(mu + nu) tiny or huge, and beta
/// large enough to flip the sign of e^nu sinh(a) + beta beyond |a| = 20, where
/// the log-space form takes over. The map stays increasing and invertible.
#[test]
fn sinh_is_monotone_across_its_log_space_switch() {
    let cases: [[f64; 5]; 5] = [
        [0.2, 0.0, 0.0, -15.0, -15.0],
        [0.2, 0.0, 0.0, 15.0, 15.0],
        [0.11, -1e9, 0.0, 0.0, 0.0],
        [0.5, 3.0, 1.0, -39.0, 39.0],
        [1.0, -2.0, -0.5, 39.0, -3.0],
    ];
    for values in cases {
        let raw = Family::Sinh
            .raw_from_constrained(&values)
            .expect("admissible");
        let layer = Scalar::<f64>::from_raw(Family::Sinh, &raw);
        let mut prev = f64::NEG_INFINITY;
        for i in 0..4001 {
            let x = -40.0 + 80.0 * i as f64 / 4000.0;
            let (y, logd) = layer.x_from_z(x);
            assert!(
                y.is_finite() && logd.is_finite(),
                "{values:?}: f({x}) = {y}, log f' {logd}"
            );
            assert!(
                y >= prev,
                "{values:?}: not increasing at {x}: {prev} then {y}"
            );
            prev = y;
            let (back, _) = layer.z_from_x(y);
            let tol = 1e-9 * (1.0 + x.abs()) + 1e-12 * (-logd).exp();
            assert!(
                (back - x).abs() <= tol.max(1e-9),
                "{values:?}: {x} -> {y} -> {back}"
            );
        }
    }
}

/// Radial flows in float32 near their centre, where f(r) - f(0) and r + f(0)
/// cancel: they agree with float64 (as the GPU kernels must).
#[test]
fn float32_radial_flows_are_accurate_near_the_centre() {
    use flowplay::flow::FlowModel;
    let mut checked = 0;
    for (name, stack) in scalar_table() {
        let mut rng = Rng::seeded(21);
        let spec = RadialSpec {
            dim: 2,
            stack: stack.clone(),
            conditioner: RadialConditioner::Direct,
        };
        let mut f = RadialFlow::<f64>::init(spec, Some(&[0.3, -0.2]), Some(&[0.1, -0.1]), &mut rng)
            .expect("valid");
        // Shift every layer's output so that f(0) is far from 0.
        let raw: Vec<f64> = random_raw(&stack, &mut rng, 0.5);
        f.params_mut()[4..].copy_from_slice(&raw);
        let model32: FlowModel<f32> = FlowModel::Radial(f).cast();
        // the reference has exactly the float32 parameters
        let model64: FlowModel<f64> = model32.cast();
        for (k, scale) in [1e-6, 1e-5, 1e-4, 1e-3, 1e-2].into_iter().enumerate() {
            let angle = 0.7 + k as f64;
            let p64 = [0.3 + scale * angle.cos(), -0.2 + scale * angle.sin()];
            let p32 = [p64[0] as f32, p64[1] as f32];
            // the float32 point itself, in float64, is the reference input
            let p_ref = [p32[0] as f64, p32[1] as f64];
            for sampling in [true, false] {
                let (q64, ld64) = apply(model64.as_flow(), sampling, &p_ref);
                let mut q32 = [0f32; 2];
                let mut ld32 = [0f32];
                if sampling {
                    model32.as_flow().x_from_z(&p32, &mut q32, &mut ld32);
                } else {
                    model32.as_flow().z_from_x(&p32, &mut q32, &mut ld32);
                }
                assert!(
                    (ld32[0] as f64 - ld64).abs() < 1e-3 * (1.0 + ld64.abs()),
                    "{name} sampling={sampling} at offset {scale}: log det f32 {} vs f64 {ld64}",
                    ld32[0]
                );
                for j in 0..2 {
                    assert!(
                        (q32[j] as f64 - q64[j]).abs() < 1e-4 * (1.0 + q64[j].abs()),
                        "{name}: point {q32:?} vs {q64:?}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 10 * 5 * 2);
}

/// The learned radius map the app plots, r -> f(r) - f(0), is the stack's own
/// difference along every ray (direct flow) and along the ray asked for (Fourier).
#[test]
fn radius_maps_are_the_stack_differences() {
    let mut rng = Rng::seeded(3);
    for conditioner in [
        RadialConditioner::Direct,
        RadialConditioner::Fourier { order: 2 },
    ] {
        let spec = RadialSpec {
            dim: 2,
            stack: Stack::uniform(Family::Cubic, 3),
            conditioner: conditioner.clone(),
        };
        let mut flow =
            RadialFlow::<f64>::init(spec, Some(&[0.2, 0.1]), Some(&[0.3, -0.2]), &mut rng).unwrap();
        perturb(&mut flow.params_mut()[4..], &mut rng, 0.3);
        for angle in [0.0f64, 1.0, 2.5, -2.0] {
            let radii = [0.1, 0.5, 1.0, 2.0];
            let map = flow.radius_map(angle, &radii);
            // along the ray at `angle` (in the scaled frame) the flow moves the
            // point at radius r to radius f(r) - f(0)
            let s = flow.log_scale().to_vec();
            for (r, m) in radii.iter().zip(&map) {
                let z = [
                    0.2 + r * angle.cos() * (-s[0]).exp(),
                    0.1 + r * angle.sin() * (-s[1]).exp(),
                ];
                let (x, _) = apply(&flow, true, &z);
                let w = [(x[0] - 0.2) * s[0].exp(), (x[1] - 0.1) * s[1].exp()];
                let r_out = (w[0] * w[0] + w[1] * w[1]).sqrt();
                assert!(
                    (r_out - m).abs() < 1e-9 * (1.0 + m.abs()),
                    "{conditioner:?} angle {angle}: {r_out} vs {m}"
                );
            }
            assert_eq!(flow.layer_params(angle).len(), 3);
        }
    }
}

/// The Z2-equivariant lattice flows commute with phi -> -phi in both
/// directions (the same log-det for phi and -phi), whatever their parameters;
/// the plain lattice flow, trained-looking, does not.
#[test]
fn z2_lattice_flows_commute_with_the_reflection() {
    let mut rng = Rng::seeded(21);
    for (name, mut flow) in flow_table(9) {
        if !name.starts_with("lattice") {
            continue;
        }
        // far from the initialization, where a plain flow is clearly not odd
        perturb(flow.params_mut(), &mut rng, 0.3);
        let d = flow.dim();
        let p: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
        let minus: Vec<f64> = p.iter().map(|v| -v).collect();
        let mut worst = 0.0f64;
        for sampling in [true, false] {
            let (q, ld) = apply(flow.as_ref(), sampling, &p);
            let (qm, ldm) = apply(flow.as_ref(), sampling, &minus);
            worst = worst.max((ld - ldm).abs());
            for (a, b) in q.iter().zip(&qm) {
                worst = worst.max((a + b).abs());
            }
        }
        if name.starts_with("lattice-z2") {
            assert!(worst < 1e-12, "{name}: off by {worst}");
        } else {
            assert!(worst > 1e-6, "{name}: unexpectedly odd ({worst})");
        }
    }
}

/// How far apart two float32 results may be: a few roundings of the values
/// along the chain (`scale`: the size of those values).
fn close32(a: f32, b: f32, scale: f32) -> bool {
    (a - b).abs() <= 2e-5 * scale.max(a.abs()).max(b.abs())
}

/// The lane-packed stacks ([`PackedStack`]) against the scalar `_lanes` passes in
/// float32, for every stack of the table and one of all packed families: the
/// stacks the packed form covers (cubic, cubic-rational, sinh and affine layers)
/// give the scalar results (to the bit when packed from the scalar layers, to
/// float32 rounding when built from raw parameters with the vector exp or where
/// a sinh layer's vector exp, expm1 and ln1p stand in for the scalar ones), in
/// both directions and for the gradients; the others are refused.
#[test]
fn packed_lanes_agree_with_the_scalar_lanes() {
    use flowplay::bijection::lanes::{
        LANES, PackedStack, add_lane_major, to_lane_inner, to_lane_major,
    };
    let mut rng = Rng::seeded(0x1a9e5);
    let mut covered = Vec::new();
    // and every packed family in one stack (layers of 2, 3, 4 and 5 raw values)
    let all_packed = Stack::mixed(vec![
        Family::Affine,
        Family::CubicRational,
        Family::Sinh,
        Family::Cubic,
        Family::CubicRational,
    ]);
    for (name, stack) in scalar_table()
        .into_iter()
        .chain([("packed-families", all_packed)])
    {
        let k = stack.len();
        let p = stack.n_raw();
        for n in [LANES, 5, 1] {
            // each chain its own parameters, as a Fourier conditioner gives
            let raws: Vec<f32> = (0..n)
                .flat_map(|_| random_raw(&stack, &mut rng, 1.0))
                .map(|v| v as f32)
                .collect();
            let built: Vec<Vec<Scalar<f32>>> = raws
                .chunks(p)
                .map(|raw| {
                    let mut layers = Vec::new();
                    stack.build(raw, &mut layers);
                    layers
                })
                .collect();
            let (mut from_layers, mut from_raw) = (PackedStack::new(), PackedStack::new());
            let packs = from_layers.pack(&built);
            // the packed stacks take raw values, traces and raw adjoints lane-inner
            let mut raws_inner = vec![0f32; p * LANES];
            to_lane_inner(&raws, n, p, &mut raws_inner);
            assert_eq!(from_raw.build(&stack, &raws_inner, n), packs, "{name}");
            if !packs {
                assert_eq!(from_layers.lanes(), 0, "{name}");
                continue;
            }
            covered.push(name);
            // points from the centre of the data to where the closed form
            // hands over to the scalar rule (|g| beyond 1e15)
            let points = [
                0.3f32, -1.7, 0.0, 4.2, -1e-30, 2e6, -7.5e5, 11.0, -0.05, 1e-4, 2.5, -3.3, 7e3,
                -0.9, 60.0, 1.1,
            ];
            let v0: Vec<f32> = (0..n).map(|i| points[i % points.len()]).collect();
            let v0 = &v0[..];
            let bitwise = !stack.layers().contains(&Family::Sinh);
            for (how, packed, exact) in [
                ("packed", &from_layers, bitwise),
                ("built", &from_raw, false),
            ] {
                let same = |a: f32, b: f32, scale: f32| {
                    if exact {
                        a == b || (a.is_nan() && b.is_nan())
                    } else {
                        close32(a, b, scale)
                    }
                };
                // f(z) alone and with log f', and f^-1(x)
                let (mut want, mut got) = (v0.to_vec(), v0.to_vec());
                let (mut tw, mut tg_inner) = (vec![0f32; n * k], vec![0f32; k * LANES]);
                let mut tg = vec![0f32; n * k];
                Stack::x_from_z_value_lanes(&built, &mut want, &mut tw);
                packed.x_from_z_value(&mut got, &mut tg_inner);
                for i in 0..n {
                    assert!(
                        same(want[i], got[i], 1.0),
                        "{name} {how} f lane {i}: {} vs {}",
                        want[i],
                        got[i]
                    );
                }
                for sampling in [true, false] {
                    let (mut want, mut got) = (v0.to_vec(), v0.to_vec());
                    let (mut lw, mut lg) = (vec![0f32; n], vec![0f32; n]);
                    if sampling {
                        Stack::x_from_z_lanes(&built, &mut want, &mut lw, &mut tw);
                        packed.x_from_z(&mut got, &mut lg, &mut tg_inner);
                    } else {
                        Stack::z_from_x_lanes(&built, &mut want, &mut lw, &mut tw);
                        packed.z_from_x(&mut got, &mut lg, &mut tg_inner);
                    }
                    to_lane_major(&tg_inner, n, k, &mut tg);
                    for i in 0..n {
                        assert!(
                            same(want[i], got[i], 1.0),
                            "{name} {how} sampling={sampling} value lane {i}: {} vs {}",
                            want[i],
                            got[i]
                        );
                        assert!(
                            same(lw[i], lg[i], 1.0),
                            "{name} {how} sampling={sampling} log f' lane {i}: {} vs {}",
                            lw[i],
                            lg[i]
                        );
                    }
                    for (j, (a, b)) in tw.iter().zip(&tg).enumerate() {
                        assert!(same(*a, *b, 1.0), "{name} {how} trace {j}: {a} vs {b}");
                    }
                    // reverse mode from the same traces
                    let ends = if sampling { want.clone() } else { v0.to_vec() };
                    let ld_bar: Vec<f32> = (0..n).map(|i| 0.5 - 0.1 * i as f32).collect();
                    let (mut bw, mut bg) = (vec![1f32; n], vec![1f32; n]);
                    let (mut rw, mut rg) = (vec![0f32; n * p], vec![0f32; n * p]);
                    let mut rg_inner = vec![0f32; p * LANES];
                    let mut tw_inner = vec![0f32; k * LANES];
                    to_lane_inner(&tw, n, k, &mut tw_inner);
                    if sampling {
                        stack
                            .x_from_z_backward_lanes(&built, &tw, &ends, &mut bw, &ld_bar, &mut rw);
                        packed.x_from_z_backward(&tw_inner, &ends, &mut bg, &ld_bar, &mut rg_inner);
                    } else {
                        stack
                            .z_from_x_backward_lanes(&built, &tw, &ends, &mut bw, &ld_bar, &mut rw);
                        packed.z_from_x_backward(&tw_inner, &ends, &mut bg, &ld_bar, &mut rg_inner);
                    }
                    add_lane_major(&rg_inner, n, p, &mut rg);
                    let scale = rw.iter().chain(&bw).fold(1f32, |m, v| m.max(v.abs()));
                    for i in 0..n {
                        assert!(
                            same(bw[i], bg[i], scale),
                            "{name} {how} sampling={sampling} input adjoint lane {i}: {} vs {}",
                            bw[i],
                            bg[i]
                        );
                    }
                    for (j, (a, b)) in rw.iter().zip(&rg).enumerate() {
                        assert!(
                            same(*a, *b, scale),
                            "{name} {how} sampling={sampling} raw adjoint {j}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
    covered.dedup();
    assert_eq!(
        covered,
        [
            "cubic_rational",
            "sinh",
            "cubic",
            "affine",
            "stack-8-cubic",
            "stack-8-cubic_rational",
            "stack-8-sinh",
            "packed-families"
        ]
    );
}
