//! Targets: densities integrate to one, samples land where the density is,
//! energy gradients match finite differences, images load or fail clearly.

use flowplay::rng::Rng;
use flowplay::target::{ImageDensity, Target, TargetError, TargetKind};

/// Riemann sum of exp(log p) over [-L, L]^2.
fn mass(target: &Target, half: f64, n: usize) -> f64 {
    let h = 2.0 * half / n as f64;
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            let x = [-half + (i as f64 + 0.5) * h, -half + (j as f64 + 0.5) * h];
            s += target.log_density(&x).map_or(0.0, f64::exp);
        }
    }
    s * h * h
}

#[test]
fn known_densities_are_normalized_and_match_their_samplers() {
    for name in [
        "8gaussians",
        "rings",
        "circles",
        "checkerboard",
        "spiral",
        "annulus",
    ] {
        let target = Target::parse(name).unwrap();
        assert_eq!(target.kind(), TargetKind::Samples);
        let n = if name == "spiral" { 200 } else { 500 };
        let m = mass(&target, 5.0, n);
        assert!((m - 1.0).abs() < 0.01, "{name}: density integrates to {m}");
        // The sampler and the density agree: moments of the samples match
        // the moments integrated on a grid, within Monte Carlo error.
        let mut rng = Rng::seeded(1);
        let n_samples = 40_000;
        let xs = target.sample(n_samples, &mut rng).unwrap();
        let feats = |p: &[f64]| [p[0], p[1], p[0] * p[0], p[1] * p[1], p[0] * p[1]];
        let mut sample_mean = [0.0; 5];
        let mut sample_sq = [0.0; 5];
        for p in xs.chunks(2) {
            for (k, f) in feats(p).iter().enumerate() {
                sample_mean[k] += f / n_samples as f64;
                sample_sq[k] += f * f / n_samples as f64;
            }
        }
        let (half, cells) = (5.0, 400);
        let h = 2.0 * half / cells as f64;
        let mut grid_mean = [0.0; 5];
        for i in 0..cells {
            for j in 0..cells {
                let p = [-half + (i as f64 + 0.5) * h, -half + (j as f64 + 0.5) * h];
                let w = target.log_density(&p).map_or(0.0, f64::exp) * h * h / m;
                for (k, f) in feats(&p).iter().enumerate() {
                    grid_mean[k] += w * f;
                }
            }
        }
        for k in 0..5 {
            let se = ((sample_sq[k] - sample_mean[k] * sample_mean[k]) / n_samples as f64).sqrt();
            let diff = (sample_mean[k] - grid_mean[k]).abs();
            assert!(
                diff < 5.0 * se + 0.01,
                "{name}: moment {k}: samples {} vs density {}",
                sample_mean[k],
                grid_mean[k]
            );
        }
    }
}

#[test]
fn every_sample_target_samples_reproducibly() {
    for name in Target::NAMES {
        let target = Target::parse(name).unwrap();
        let mut a = Rng::seeded(9);
        let mut b = Rng::seeded(9);
        match target.kind() {
            TargetKind::Samples => {
                let xa = target.sample(100, &mut a).unwrap();
                let xb = target.sample(100, &mut b).unwrap();
                assert_eq!(xa, xb, "{name}");
                assert_eq!(xa.len(), 200);
                assert!(xa.iter().all(|v| v.is_finite() && v.abs() < 10.0), "{name}");
            }
            TargetKind::Energy => assert!(target.sample(10, &mut a).is_none()),
        }
    }
}

#[test]
fn energy_gradients_match_finite_differences() {
    let mut rng = Rng::seeded(4);
    for name in ["poly1d", "twomoons-energy", "circular-gmm", "ring-mixture"] {
        let target = Target::parse(name).unwrap();
        let d = target.dim();
        for _ in 0..50 {
            let x: Vec<f64> = (0..d).map(|_| 2.0 * rng.normal()).collect();
            let (_, g) = target.log_density_grad(&x).unwrap();
            for k in 0..d {
                let h = 1e-6;
                let mut xp = x.clone();
                let mut xm = x.clone();
                xp[k] += h;
                xm[k] -= h;
                let fd = (target.log_density_grad(&xp).unwrap().0
                    - target.log_density_grad(&xm).unwrap().0)
                    / (2.0 * h);
                assert!(
                    (g[k] - fd).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{name} at {x:?}: {} vs {fd}",
                    g[k]
                );
            }
        }
    }
    // The 1D target's normalizer (log Z ~ 1.8374, by quadrature).
    let lz = Target::Poly1d.log_z().unwrap();
    assert!((lz - 1.8374).abs() < 1e-3, "{lz}");
}

#[test]
fn images_become_densities_and_non_images_are_refused() {
    // A 4 x 2 image, bright only in its top-right pixel.
    let mut img = image::GrayImage::new(4, 2);
    img.put_pixel(3, 0, image::Luma([255]));
    let mut png = Vec::new();
    image::DynamicImage::ImageLuma8(img)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let density = ImageDensity::from_bytes(&png, false).unwrap();
    let target = Target::Image(density);
    let mut rng = Rng::seeded(2);
    let xs = target.sample(500, &mut rng).unwrap();
    // Top-right pixel: x in [1.75, 3.5), y in (0, 1.75].
    assert!(
        xs.chunks(2)
            .all(|p| p[0] >= 1.75 && p[0] < 3.5 && p[1] > 0.0 && p[1] <= 1.75),
        "{:?}",
        &xs[..4]
    );
    assert!((mass(&target, 4.0, 400) - 1.0).abs() < 0.02);
    // Inverted, the same image puts its mass on the seven dark pixels.
    let inverted = Target::Image(ImageDensity::from_bytes(&png, true).unwrap());
    assert_eq!(inverted.log_density(&[3.0, 1.0]), Some(f64::NEG_INFINITY));
    let err = ImageDensity::from_bytes(b"GIF89a not really", false).unwrap_err();
    assert!(matches!(err, TargetError::NotAnImage(_)), "{err}");
    assert!(err.to_string().starts_with("not a PNG or JPEG"), "{err}");
    let black = ImageDensity::from_weights(2, 2, &[0.0; 4]).unwrap_err();
    assert_eq!(black, TargetError::NoMass);
}

#[test]
fn every_target_is_labelled_and_says_whether_its_density_is_known() {
    let with_density = [
        "8gaussians",
        "rings",
        "circles",
        "checkerboard",
        "spiral",
        "annulus",
        "poly1d",
        "twomoons-energy",
        "circular-gmm",
        "ring-mixture",
    ];
    for name in Target::NAMES {
        let target = Target::parse(name).unwrap();
        assert_eq!(target.name(), name);
        assert!(!target.source().is_empty());
        assert_eq!(target.has_density(), with_density.contains(&name), "{name}");
    }
}

/// Targets with samples and a smooth density also give its gradient (reverse
/// KL); piecewise-constant ones do not.
#[test]
fn smooth_sample_targets_have_a_density_gradient() {
    for name in ["8gaussians", "rings", "circles", "spiral", "annulus"] {
        let target = Target::parse(name).unwrap();
        for x in [[0.3, -0.7], [1.9, 0.4], [-2.2, -1.1]] {
            let (v, g) = target.log_density_grad(&x).unwrap();
            assert!((v - target.log_density(&x).unwrap()).abs() < 1e-12);
            for k in 0..2 {
                let h = 1e-4;
                let (mut up, mut down) = (x, x);
                up[k] += h;
                down[k] -= h;
                let fd = (target.log_density(&up).unwrap() - target.log_density(&down).unwrap())
                    / (2.0 * h);
                assert!(
                    (fd - g[k]).abs() < 1e-5 * fd.abs().max(1.0),
                    "{name} at {x:?}: {fd} vs {}",
                    g[k]
                );
            }
        }
    }
    for name in ["checkerboard", "moons"] {
        assert!(
            Target::parse(name)
                .unwrap()
                .log_density_grad(&[0.1, 0.2])
                .is_none()
        );
    }
}
