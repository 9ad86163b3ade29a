//! The deformed grids of the live views: polylines drawn in latent space and
//! pushed through `x_from_z` (on the GPU or the CPU), so the picture shows how
//! the flow moves space. A radial flow gets a polar grid around its centre, in
//! its own scaled coordinates: circles `|S (z - c)| = r` and rays from `c`,
//! which a radial map keeps as rays and turns into circles of radius
//! `f(r) - f(0)` (direct flows) or star-shaped curves (angle-dependent ones).
//! Coupling flows get a Cartesian grid.

use std::ops::Range;

/// Polylines in 2D: all points in one list (`x, y` pairs), and which points
/// make up each line.
#[derive(Clone, Debug, PartialEq)]
pub struct Polylines {
    pub points: Vec<f64>,
    pub lines: Vec<Range<usize>>,
}

impl Polylines {
    fn new() -> Self {
        Self {
            points: Vec::new(),
            lines: Vec::new(),
        }
    }

    fn push_line(&mut self, n: usize, point: impl Fn(usize) -> [f64; 2]) {
        let start = self.points.len() / 2;
        for i in 0..n {
            self.points.extend(point(i));
        }
        self.lines.push(start..start + n);
    }

    /// Number of points over all lines.
    pub fn len(&self) -> usize {
        self.points.len() / 2
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// A polar grid around `center` in the flow's scaled coordinates (`log_scale`
/// sigma, so a latent point is `c + e^-sigma (r cos t, r sin t)`): one closed
/// circle per radius in `radii`, `rays` rays from the centre out to the largest
/// radius, `samples` points per line.
pub fn polar(
    center: [f64; 2],
    log_scale: [f64; 2],
    radii: &[f64],
    rays: usize,
    samples: usize,
) -> Polylines {
    let samples = samples.max(2);
    let at = |r: f64, t: f64| {
        [
            center[0] + (-log_scale[0]).exp() * r * t.cos(),
            center[1] + (-log_scale[1]).exp() * r * t.sin(),
        ]
    };
    let mut grid = Polylines::new();
    let tau = std::f64::consts::TAU;
    for &r in radii {
        // closed: the last point repeats the first
        grid.push_line(samples + 1, |i| at(r, tau * i as f64 / samples as f64));
    }
    let outer = radii.iter().copied().fold(0.0, f64::max);
    for k in 0..rays {
        let t = tau * k as f64 / rays as f64;
        grid.push_line(samples, |i| at(outer * i as f64 / (samples - 1) as f64, t));
    }
    grid
}

/// A Cartesian grid over `[low, high]^2`: `count` vertical and `count`
/// horizontal lines, `samples` points per line.
pub fn cartesian(low: f64, high: f64, count: usize, samples: usize) -> Polylines {
    let samples = samples.max(2);
    let count = count.max(2);
    let step = |i: usize, n: usize| low + (high - low) * i as f64 / (n - 1) as f64;
    let mut grid = Polylines::new();
    for k in 0..count {
        let c = step(k, count);
        grid.push_line(samples, |i| [c, step(i, samples)]);
    }
    for k in 0..count {
        let c = step(k, count);
        grid.push_line(samples, |i| [step(i, samples), c]);
    }
    grid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polar_grid_circles_and_rays() {
        let g = polar([1.0, -2.0], [0.0, 0.0], &[0.5, 1.0, 2.0], 8, 16);
        assert_eq!(g.lines.len(), 3 + 8);
        assert_eq!(g.len(), 3 * 17 + 8 * 16);
        for (line, r) in g.lines[..3].iter().zip([0.5, 1.0, 2.0]) {
            for i in line.clone() {
                let (x, y) = (g.points[2 * i] - 1.0, g.points[2 * i + 1] + 2.0);
                assert!(((x * x + y * y).sqrt() - r).abs() < 1e-12);
            }
            let (first, last) = (line.start, line.end - 1);
            assert!((g.points[2 * first] - g.points[2 * last]).abs() < 1e-12);
        }
        // each ray runs from the centre to the outer circle
        let ray = g.lines[3].clone();
        assert_eq!(
            [g.points[2 * ray.start], g.points[2 * ray.start + 1]],
            [1.0, -2.0]
        );
        assert!((g.points[2 * (ray.end - 1)] - 3.0).abs() < 1e-12);
    }

    /// A direct radial flow keeps the rays and maps each circle of radius r to
    /// the circle of radius f(r) - f(0), in its scaled coordinates.
    #[test]
    fn direct_radial_flows_map_grid_circles_to_circles() {
        use crate::bijection::{Family, Stack};
        use crate::flow::{Flow, RadialConditioner, RadialFlow, RadialSpec};
        let mut rng = crate::rng::Rng::seeded(2);
        let spec = RadialSpec {
            dim: 2,
            stack: Stack::uniform(Family::Cubic, 4),
            conditioner: RadialConditioner::Direct,
        };
        let (c, s) = ([0.3, -0.4], [0.2, -0.1]);
        let mut flow = RadialFlow::<f64>::init(spec, Some(&c), Some(&s), &mut rng).unwrap();
        for v in flow.params_mut().iter_mut().skip(4) {
            *v += 0.3 * rng.normal();
        }
        let radii = [0.5, 1.0, 2.0];
        let grid = polar(c, s, &radii, 6, 24);
        let mut x = vec![0.0; grid.points.len()];
        let mut ld = vec![0.0; grid.len()];
        flow.x_from_z(&grid.points, &mut x, &mut ld);
        let scaled = |i: usize| {
            let u = s[0].exp() * (x[2 * i] - c[0]);
            let v = s[1].exp() * (x[2 * i + 1] - c[1]);
            (u, v)
        };
        for (line, &r) in grid.lines.iter().zip(&radii) {
            let expected = flow.radius_map(0.0, &[r])[0];
            for i in line.clone() {
                let (u, v) = scaled(i);
                assert!(((u * u + v * v).sqrt() - expected).abs() < 1e-9);
            }
        }
        for (k, line) in grid.lines[radii.len()..].iter().enumerate() {
            let t = std::f64::consts::TAU * k as f64 / 6.0;
            for i in line.clone().skip(1) {
                let (u, v) = scaled(i);
                assert!((v.atan2(u) - t.sin().atan2(t.cos())).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn cartesian_grid_spans_the_square() {
        let g = cartesian(-4.0, 4.0, 9, 5);
        assert_eq!(g.lines.len(), 18);
        assert_eq!(g.len(), 18 * 5);
        let xs: Vec<f64> = g.points.iter().step_by(2).copied().collect();
        assert_eq!(xs.iter().copied().fold(f64::INFINITY, f64::min), -4.0);
        assert_eq!(xs.iter().copied().fold(f64::NEG_INFINITY, f64::max), 4.0);
    }
}
