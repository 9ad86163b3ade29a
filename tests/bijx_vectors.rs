//! Agreement with values computed by bijx 1.3.2 in float64 (tests/fixtures/bijx_f64.json,
//! copied from the shared reference).

use flowplay::bijection::{Family, Scalar};
use serde_json::Value;

fn fixture() -> Value {
    let text = include_str!("fixtures/bijx_f64.json");
    serde_json::from_str(text).expect("fixture parses")
}

fn num(v: &Value) -> f64 {
    v.as_f64().expect("number")
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

/// A bijx scalar case as (family, constrained values in our order).
pub fn scalar_case(case: &Value) -> (Family, Vec<f64>) {
    let label = case["bijection"].as_str().expect("label");
    let p = &case["params_constrained"];
    let g = |k: &str| num(&p[k]);
    if label.starts_with("CubicRational") {
        (Family::CubicRational, vec![g("alpha"), g("beta"), g("loc")])
    } else if label.starts_with("SinhConjugation") {
        (Family::Sinh, vec![g("s"), g("beta"), g("loc"), g("mu"), g("nu")])
    } else if label.starts_with("CubicConjugation") {
        (Family::Cubic, vec![g("a"), g("b"), g("beta"), g("loc")])
    } else {
        panic!("unknown case {label}")
    }
}

#[test]
fn scalar_families_match_bijx_to_1e_10() {
    let data = fixture();
    let cases = data["scalar_cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 12);
    let mut checked = 0;
    for case in cases {
        let (family, values) = scalar_case(case);
        let raw = family.raw_from_constrained(&values).expect("in range");
        let layer = Scalar::<f64>::from_raw(family, &raw);
        for row in case["rows"].as_array().expect("rows") {
            let x = num(&row["x"]);
            let y_ref = num(&row["y"]);
            let ld_ref = num(&row["log_jac"]);
            let (y, ld) = layer.x_from_z(x);
            assert!(close(y, y_ref, 1e-10), "{family:?} {values:?} x={x}: y {y} vs {y_ref}");
            assert!(close(ld, ld_ref, 1e-10), "{family:?} {values:?} x={x}: log f' {ld} vs {ld_ref}");
            let (x_back, ld_back) = layer.z_from_x(y_ref);
            assert!(close(x_back, x, 1e-9), "{family:?} {values:?}: inverse {x_back} vs {x}");
            assert!(close(ld_back, ld_ref, 1e-9));
            checked += 1;
        }
    }
    assert_eq!(checked, 12 * 15);
}

#[test]
fn parameter_transforms_match_bijx() {
    let data = fixture();
    let t = &data["transforms"];
    let raw: Vec<f64> = t["raw_inputs"].as_array().unwrap().iter().map(num).collect();
    let col = |key: &str| -> Vec<f64> { t[key].as_array().unwrap().iter().map(num).collect() };
    let alpha = col("CubicRational.alpha: SigmoidTransform(low=-1,high=8,eps=1e-3)");
    let beta = col("CubicRational.beta: SoftplusTransform(eps=0.1) = 0.1+softplus(raw+1)");
    let s = col("SinhConjugation.alpha(scale): softplus(raw)+0.1");
    let mu = col("SinhConjugation.mu/nu: arcsinh(raw)");
    let ab = col("CubicConjugation.a/b: safe_exp_scale = exp(2*tanh(raw/2))");
    for (i, &r) in raw.iter().enumerate() {
        let cr = Scalar::<f64>::from_raw(Family::CubicRational, &[r, r, 0.0]).constrained();
        assert!(close(cr[0], alpha[i], 1e-12), "alpha({r})");
        assert!(close(cr[1], beta[i], 1e-12), "beta({r})");
        let sh = Scalar::<f64>::from_raw(Family::Sinh, &[r, 0.0, 0.0, r, r]).constrained();
        assert!(close(sh[0], s[i], 1e-12), "s({r})");
        assert!(close(sh[3], mu[i], 1e-12) && close(sh[4], mu[i], 1e-12), "mu/nu({r})");
        let cu = Scalar::<f64>::from_raw(Family::Cubic, &[r, r, 0.0, 0.0]).constrained();
        assert!(close(cu[0], ab[i], 1e-12) && close(cu[1], ab[i], 1e-12), "a/b({r})");
    }
    // Default initializations give the documented constrained values.
    let mut zero = || 0.0;
    let d = Scalar::<f64>::from_raw(Family::CubicRational, &Family::CubicRational.default_raw(&mut zero));
    assert!(close(d.constrained()[1], 1.0, 1e-12));
    let d = Scalar::<f64>::from_raw(Family::Sinh, &Family::Sinh.default_raw(&mut zero));
    assert!(close(d.constrained()[0], 1.0, 1e-12));
    let d = Scalar::<f64>::from_raw(Family::Cubic, &Family::Cubic.default_raw(&mut zero));
    assert!(close(d.constrained()[0], 1.0, 1e-12) && close(d.constrained()[1], 0.3, 1e-12));
}

#[test]
fn identities_match_bijx() {
    let data = fixture();
    let id = &data["identities"];
    let pair = |k: &str| -> (f64, f64) {
        let a = id[k].as_array().unwrap();
        (num(&a[0]), num(&a[1]))
    };
    let check = |family: Family, values: &[f64], key: &str| {
        let raw = family.raw_from_constrained(values).unwrap();
        let layer = Scalar::<f64>::from_raw(family, &raw);
        let (lo, hi) = pair(key);
        let got_hi = layer.x_from_z(1e3).0 - 1e3;
        let got_lo = layer.x_from_z(-1e3).0 + 1e3;
        assert!((got_hi - lo).abs() < 1e-9 && (got_lo - hi).abs() < 1e-9, "{key}: {got_hi} {got_lo}");
    };
    check(Family::CubicRational, &[2.0, 1.0, 0.0], "cubic_rational_y_minus_x_at_pm1e3(loc0,alpha2,beta1)");
    check(Family::Sinh, &[2.0, 0.5, 0.0, 0.3, -0.2], "sinh_y_minus_x_at_pm1e3(loc0,s2,beta0.5,mu0.3,nu-0.2)");
    check(Family::Cubic, &[1.0, 0.3, 1.0, 0.0], "cubic_conj_y_minus_x_at_pm1e3(loc0,beta1,a1,b0.3)");
}

#[test]
fn float32_stress_inverse_matches_float64_reference() {
    let data = fixture();
    for case in data["float32_stress"]["cubic_rational_inverse_large_y"].as_array().unwrap() {
        let (alpha, beta) = (num(&case["alpha"]), num(&case["beta"]));
        let raw = Family::CubicRational.raw_from_constrained(&[alpha, beta, 0.0]).unwrap();
        let raw32: Vec<f32> = raw.iter().map(|&v| v as f32).collect();
        let layer = Scalar::<f32>::from_raw(Family::CubicRational, &raw32);
        let ys = case["y"].as_array().unwrap();
        let xs = case["x_float64"].as_array().unwrap();
        for (y, x) in ys.iter().zip(xs) {
            let (got, _) = layer.z_from_x(num(y) as f32);
            let want = num(x);
            assert!(((got as f64) - want).abs() <= 2e-6 * want.abs().max(1.0), "y={y}: {got} vs {want}");
        }
    }
}
