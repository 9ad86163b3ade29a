//! 2D sample targets (docs/mathematics.md, section 7): samplers, and log-densities where a
//! closed form (or a cheap quadrature) exists. Most are FFJORD's toy data.

use crate::rng::Rng;
use crate::stats::{log_normal_1d as log_normal, logsumexp};
use std::f64::consts::{PI, TAU};

/// Log of the exponentially scaled Bessel function: log(I0(x) e^-x), x >= 0.
fn log_i0e(x: f64) -> f64 {
    if x < 15.0 {
        // power series sum (x/2)^(2k) / (k!)^2
        let q = 0.25 * x * x;
        let (mut term, mut sum) = (1.0, 1.0);
        for k in 1..60 {
            term *= q / (k * k) as f64;
            sum += term;
            if term < 1e-17 * sum {
                break;
            }
        }
        sum.ln() - x
    } else {
        // asymptotic expansion
        let t = 1.0 / (8.0 * x);
        let s = 1.0 + t + 9.0 * t * t / 2.0 + 225.0 * t * t * t / 6.0;
        s.ln() - 0.5 * (TAU * x).ln()
    }
}

/// Density of a ring of radius `radius` blurred by N(0, s^2 I): the angular
/// average of a Gaussian, `exp(-(r^2 + R^2)/(2 s^2)) I0(r R / s^2) / (2 pi s^2)`.
fn log_ring(x: &[f64], radius: f64, s: f64) -> f64 {
    let r = (x[0] * x[0] + x[1] * x[1]).sqrt();
    let s2 = s * s;
    let z = r * radius / s2;
    -(r - radius).powi(2) / (2.0 * s2) + log_i0e(z) - (TAU * s2).ln()
}

pub fn moons(rng: &mut Rng) -> [f64; 2] {
    let t = PI * rng.uniform();
    let (x, y) = if rng.uniform() < 0.5 {
        (t.cos(), t.sin())
    } else {
        (1.0 - t.cos(), 1.0 - t.sin() - 0.5)
    };
    [
        2.0 * (x + 0.1 * rng.normal()) - 1.0,
        2.0 * (y + 0.1 * rng.normal()) - 0.2,
    ]
}

const SQRT2: f64 = 1.414;

fn eight_centres() -> [[f64; 2]; 8] {
    let h = 1.0 / 2f64.sqrt();
    [
        [1.0, 0.0],
        [-1.0, 0.0],
        [0.0, 1.0],
        [0.0, -1.0],
        [h, h],
        [h, -h],
        [-h, h],
        [-h, -h],
    ]
}

pub fn eight_gaussians(rng: &mut Rng) -> [f64; 2] {
    let c = eight_centres()[rng.below(8)];
    [
        (4.0 * c[0] + 0.5 * rng.normal()) / SQRT2,
        (4.0 * c[1] + 0.5 * rng.normal()) / SQRT2,
    ]
}

pub fn eight_gaussians_log_density(x: &[f64]) -> f64 {
    let s = 0.5 / SQRT2;
    let terms: Vec<f64> = eight_centres()
        .iter()
        .map(|c| {
            log_normal(x[0] - 4.0 * c[0] / SQRT2, s) + log_normal(x[1] - 4.0 * c[1] / SQRT2, s)
        })
        .collect();
    logsumexp(&terms) - 8f64.ln()
}

const RING_RADII: [f64; 4] = [1.0, 0.75, 0.5, 0.25];

pub fn rings(rng: &mut Rng) -> [f64; 2] {
    let radius = 3.0 * RING_RADII[rng.below(4)];
    let t = TAU * rng.uniform();
    [
        radius * t.cos() + 0.08 * rng.normal(),
        radius * t.sin() + 0.08 * rng.normal(),
    ]
}

pub fn rings_log_density(x: &[f64]) -> f64 {
    let terms: Vec<f64> = RING_RADII
        .iter()
        .map(|r| log_ring(x, 3.0 * r, 0.08))
        .collect();
    logsumexp(&terms) - 4f64.ln()
}

pub fn circles(rng: &mut Rng) -> [f64; 2] {
    let radius = if rng.uniform() < 0.5 { 1.0 } else { 0.5 };
    let t = TAU * rng.uniform();
    [
        3.0 * (radius * t.cos() + 0.08 * rng.normal()),
        3.0 * (radius * t.sin() + 0.08 * rng.normal()),
    ]
}

pub fn circles_log_density(x: &[f64]) -> f64 {
    let terms = [log_ring(x, 3.0, 0.24), log_ring(x, 1.5, 0.24)];
    logsumexp(&terms) - 2f64.ln()
}

pub fn pinwheel(rng: &mut Rng) -> [f64; 2] {
    let arm = rng.below(5) as f64;
    let f0 = 0.3 * rng.normal() + 1.0;
    let f1 = 0.1 * rng.normal();
    let angle = arm * TAU / 5.0 + 0.25 * f0.exp();
    let (s, c) = angle.sin_cos();
    [2.0 * (f0 * c + f1 * s), 2.0 * (-f0 * s + f1 * c)]
}

pub fn two_spirals(rng: &mut Rng) -> [f64; 2] {
    let n = rng.uniform().sqrt() * 540.0 * TAU / 360.0;
    let dx = -n.cos() * n + 0.5 * rng.uniform();
    let dy = n.sin() * n + 0.5 * rng.uniform();
    let sign = if rng.uniform() < 0.5 { 1.0 } else { -1.0 };
    [
        sign * dx / 3.0 + 0.1 * rng.normal(),
        sign * dy / 3.0 + 0.1 * rng.normal(),
    ]
}

pub fn checkerboard(rng: &mut Rng) -> [f64; 2] {
    let x1 = 4.0 * rng.uniform() - 2.0;
    let x2 = rng.uniform() - 2.0 * (rng.below(2) as f64) + x1.floor().rem_euclid(2.0);
    [2.0 * x1, 2.0 * x2]
}

pub fn checkerboard_log_density(x: &[f64]) -> f64 {
    let (x1, x2) = (x[0] / 2.0, x[1] / 2.0);
    if !(-2.0..2.0).contains(&x1) || !(-2.0..2.0).contains(&x2) {
        return f64::NEG_INFINITY;
    }
    // x2 - (floor(x1) mod 2) lies in [0, 1) or [-2, -1)
    let v = x2 - x1.floor().rem_euclid(2.0);
    if (0.0..1.0).contains(&v) || (-2.0..-1.0).contains(&v) {
        -(32f64.ln())
    } else {
        f64::NEG_INFINITY
    }
}

pub fn swissroll(rng: &mut Rng) -> [f64; 2] {
    let t = 1.5 * PI * (1.0 + 2.0 * rng.uniform());
    [
        (t * t.cos() + rng.normal()) / 5.0,
        (t * t.sin() + rng.normal()) / 5.0,
    ]
}

/// bijx's spiral: `t ~ U(0, 5 pi)`, `(t cos t, t sin t) / 20 + N(0, 0.02^2 I)`.
pub fn spiral(rng: &mut Rng) -> [f64; 2] {
    let t = 5.0 * PI * rng.uniform();
    [
        t * t.cos() / 20.0 + 0.02 * rng.normal(),
        t * t.sin() / 20.0 + 0.02 * rng.normal(),
    ]
}

/// The spiral's density by quadrature over t (the curve blurred by the noise).
pub fn spiral_log_density(x: &[f64]) -> f64 {
    let s = 0.02;
    let t_max = 5.0 * PI;
    // The noise is 0.02 and the curve's speed is at most ~0.8 per unit t, so a step
    // of 0.005 resolves the Gaussian along the curve.
    let n = (t_max / 0.005) as usize;
    let dt = t_max / n as f64;
    let mut terms = Vec::with_capacity(n);
    for i in 0..n {
        let t = (i as f64 + 0.5) * dt;
        let (cx, cy) = (t * t.cos() / 20.0, t * t.sin() / 20.0);
        terms.push(log_normal(x[0] - cx, s) + log_normal(x[1] - cy, s));
    }
    logsumexp(&terms) + (dt / t_max).ln()
}

pub fn line(rng: &mut Rng) -> [f64; 2] {
    let x = 5.0 * rng.uniform() - 2.5;
    [x, x]
}

pub fn cos(rng: &mut Rng) -> [f64; 2] {
    let x = 5.0 * rng.uniform() - 2.5;
    [x, 2.5 * x.sin()]
}

/// A single annulus: `|x| ~ N(2, 0.2^2)`, uniform angle.
pub fn annulus(rng: &mut Rng) -> [f64; 2] {
    let r = 2.0 + 0.2 * rng.normal();
    let t = TAU * rng.uniform();
    [r * t.cos(), r * t.sin()]
}

pub fn annulus_log_density(x: &[f64]) -> f64 {
    let r = (x[0] * x[0] + x[1] * x[1]).sqrt();
    // Polar change of variables; the mass at negative radii (1e-23) is ignored.
    log_normal(r - 2.0, 0.2) - (TAU * r.max(1e-300)).ln()
}
