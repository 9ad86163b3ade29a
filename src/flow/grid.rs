//! The deformed grids of the live views: polylines drawn in latent space and
//! pushed through `x_from_z` (on the GPU or the CPU), so the picture shows how
//! the flow moves space. A radial flow gets a polar grid around its centre, in
//! its own scaled coordinates: circles `|S (z - c)| = r` and rays from `c`,
//! which a radial map keeps as rays and turns into circles of radius
//! `f(r) - f(0)` (direct flows) or star-shaped curves (angle-dependent ones).
//! Coupling flows get a Cartesian grid. A [`DeformedGrid`] is then refined
//! where the flow bends or stretches its lines ([`Refinement`]), so they stay
//! smooth on screen.

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

/// When a deformed grid line is drawn more finely: a segment is split at its
/// latent midpoint where its image is longer than `max_length` or turns by
/// more than `max_turn` radians at either end, so a line stays smooth where the
/// flow bends or stretches it hard. Only segments whose image meets `view`
/// are split, for at most `rounds` rounds and `max_points` points in all.
#[derive(Clone, Copy, Debug)]
pub struct Refinement {
    pub max_length: f32,
    pub max_turn: f32,
    pub rounds: usize,
    pub max_points: usize,
    /// the square `[low, high]^2` of data space that is drawn
    pub view: (f32, f32),
}

/// Latent segments shorter than this are never split (a map's singular
/// point must not swallow the budget).
const MIN_LATENT_STEP: f64 = 1e-6;

/// A grid's lines in latent space with their images: per point `x, y` and
/// `log |det dx/dz|`, as the display kernels lay them out.
#[derive(Clone, Debug)]
pub struct DeformedGrid {
    pub latent: Vec<Vec<[f64; 2]>>,
    pub pushed: Vec<Vec<[f32; 3]>>,
}

/// The segments one round splits: `(line, segment)` in order, and their latent
/// midpoints (`x, y` pairs) to push.
#[derive(Debug, Default)]
pub struct Splits {
    at: Vec<(usize, usize)>,
    pub latent: Vec<f64>,
}

impl Splits {
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

impl DeformedGrid {
    /// `pushed` holds `x, y, log det` per point of `latent`, in its order.
    pub fn new(latent: &Polylines, pushed: &[f32]) -> Self {
        let point = |i: usize| [latent.points[2 * i], latent.points[2 * i + 1]];
        let image = |i: usize| [pushed[3 * i], pushed[3 * i + 1], pushed[3 * i + 2]];
        Self {
            latent: latent
                .lines
                .iter()
                .map(|r| r.clone().map(point).collect())
                .collect(),
            pushed: latent
                .lines
                .iter()
                .map(|r| r.clone().map(image).collect())
                .collect(),
        }
    }

    /// Number of points over all lines.
    pub fn len(&self) -> usize {
        self.latent.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segments the rule splits next, the longest images first while the
    /// point budget lasts.
    pub fn splits(&self, rule: &Refinement) -> Splits {
        let budget = rule.max_points.saturating_sub(self.len());
        let mut wanted: Vec<(f32, usize, usize)> = Vec::new();
        for (l, (latent, image)) in self.latent.iter().zip(&self.pushed).enumerate() {
            let xy = |i: usize| [image[i][0], image[i][1]];
            let turn_at = |i: usize| {
                if i == 0 || i + 1 >= image.len() {
                    return 0.0;
                }
                turn(xy(i - 1), xy(i), xy(i + 1))
            };
            for s in 0..image.len().saturating_sub(1) {
                let (a, b) = (xy(s), xy(s + 1));
                let step = latent_distance(latent[s], latent[s + 1]);
                if !(finite(a) && finite(b)) || step < MIN_LATENT_STEP || !meets(a, b, rule.view) {
                    continue;
                }
                let length = distance(a, b);
                if length > rule.max_length
                    || turn_at(s) > rule.max_turn
                    || turn_at(s + 1) > rule.max_turn
                {
                    wanted.push((length, l, s));
                }
            }
        }
        wanted.sort_by(|x, y| y.0.total_cmp(&x.0));
        wanted.truncate(budget);
        wanted.sort_by_key(|&(_, l, s)| (l, s));
        let latent = wanted
            .iter()
            .flat_map(|&(_, l, s)| {
                let (a, b) = (self.latent[l][s], self.latent[l][s + 1]);
                [0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])]
            })
            .collect();
        Splits {
            at: wanted.into_iter().map(|(_, l, s)| (l, s)).collect(),
            latent,
        }
    }

    /// Inserts the split segments' midpoints and their images (`pushed`:
    /// `x, y, log det` per midpoint, in the order of `splits.latent`).
    pub fn insert(&mut self, splits: &Splits, pushed: &[f32]) {
        // from the last split back, so earlier indices stay valid
        for (k, &(l, s)) in splits.at.iter().enumerate().rev() {
            let z = [splits.latent[2 * k], splits.latent[2 * k + 1]];
            let x = [pushed[3 * k], pushed[3 * k + 1], pushed[3 * k + 2]];
            self.latent[l].insert(s + 1, z);
            self.pushed[l].insert(s + 1, x);
        }
    }

    /// Refines the grid by `rule` with `push` (latent `x, y` pairs to
    /// `x, y, log det` per point), synchronously.
    pub fn refine(&mut self, rule: &Refinement, mut push: impl FnMut(&[f64]) -> Vec<f32>) {
        for _ in 0..rule.rounds {
            let splits = self.splits(rule);
            if splits.is_empty() {
                break;
            }
            let pushed = push(&splits.latent);
            self.insert(&splits, &pushed);
        }
    }
}

fn finite(p: [f32; 2]) -> bool {
    p[0].is_finite() && p[1].is_finite()
}

fn distance(a: [f32; 2], b: [f32; 2]) -> f32 {
    (b[0] - a[0]).hypot(b[1] - a[1])
}

fn latent_distance(a: [f64; 2], b: [f64; 2]) -> f64 {
    (b[0] - a[0]).hypot(b[1] - a[1])
}

/// The angle (radians, 0 to pi) between segments `a b` and `b c`; 0 where
/// either is degenerate or not finite.
fn turn(a: [f32; 2], b: [f32; 2], c: [f32; 2]) -> f32 {
    let (u, v) = ([b[0] - a[0], b[1] - a[1]], [c[0] - b[0], c[1] - b[1]]);
    let cross = u[0] * v[1] - u[1] * v[0];
    let dot = u[0] * v[0] + u[1] * v[1];
    let angle = cross.atan2(dot).abs();
    if angle.is_finite() { angle } else { 0.0 }
}

/// Whether segment `a b`'s bounding box meets the square `view`.
fn meets(a: [f32; 2], b: [f32; 2], view: (f32, f32)) -> bool {
    let (lo, hi) = view;
    a[0].min(b[0]) <= hi && a[0].max(b[0]) >= lo && a[1].min(b[1]) <= hi && a[1].max(b[1]) >= lo
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
    /// A swirl that bends lines hard near the origin: each point turned about
    /// it by `20 exp(-2 r^2)` radians (area kept: log det 0).
    fn swirl(latent: &[f64]) -> Vec<f32> {
        latent
            .chunks(2)
            .flat_map(|p| {
                let angle = 20.0 * (-2.0 * (p[0] * p[0] + p[1] * p[1])).exp();
                let (sin, cos) = angle.sin_cos();
                [
                    (cos * p[0] - sin * p[1]) as f32,
                    (sin * p[0] + cos * p[1]) as f32,
                    0.0,
                ]
            })
            .collect()
    }

    /// How far the drawn grid strays from the true image where it is drawn:
    /// the largest distance from a segment's latent midpoint, pushed, to the
    /// drawn segment.
    fn worst_chord(grid: &DeformedGrid) -> f32 {
        let mut worst = 0.0f32;
        for (latent, image) in grid.latent.iter().zip(&grid.pushed) {
            for s in 0..latent.len() - 1 {
                let (a, b) = (latent[s], latent[s + 1]);
                let mid = swirl(&[0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])]);
                let (p, q) = (
                    [image[s][0], image[s][1]],
                    [image[s + 1][0], image[s + 1][1]],
                );
                if meets(p, q, (-4.0, 4.0)) {
                    worst = worst.max(to_segment([mid[0], mid[1]], p, q));
                }
            }
        }
        worst
    }

    /// The distance from `m` to the segment `p q`.
    fn to_segment(m: [f32; 2], p: [f32; 2], q: [f32; 2]) -> f32 {
        let (u, w) = ([q[0] - p[0], q[1] - p[1]], [m[0] - p[0], m[1] - p[1]]);
        let t = ((u[0] * w[0] + u[1] * w[1]) / (u[0] * u[0] + u[1] * u[1])).clamp(0.0, 1.0);
        distance(m, [p[0] + t * u[0], p[1] + t * u[1]])
    }

    fn rule(max_points: usize) -> Refinement {
        Refinement {
            max_length: 0.5,
            max_turn: 0.12,
            rounds: 4,
            max_points,
            view: (-4.0, 4.0),
        }
    }

    /// Where a map bends the grid hard, the refined lines follow the true
    /// image closely; the coarse ones cut corners.
    #[test]
    fn refinement_follows_a_hard_bend() {
        let lines = cartesian(-3.0, 3.0, 13, 64);
        let mut grid = DeformedGrid::new(&lines, &swirl(&lines.points));
        let coarse = worst_chord(&grid);
        let base = grid.len();
        grid.refine(&rule(3 * base), swirl);
        let fine = worst_chord(&grid);
        assert!(coarse > 0.1, "coarse grid strays {coarse}");
        assert!(fine < 0.01, "refined grid strays {fine}");
        assert!(
            grid.len() > base && grid.len() <= 3 * base,
            "{} points",
            grid.len()
        );
        // every line still runs from its first latent point to its last, in order
        for (refined, range) in grid.latent.iter().zip(&lines.lines) {
            assert_eq!(
                refined[0],
                [
                    lines.points[2 * range.start],
                    lines.points[2 * range.start + 1]
                ]
            );
            let last = range.end - 1;
            assert_eq!(
                refined[refined.len() - 1],
                [lines.points[2 * last], lines.points[2 * last + 1]]
            );
        }
    }

    /// A map that keeps lines straight and short adds no points, and the point
    /// budget is never exceeded.
    #[test]
    fn refinement_spends_points_only_where_needed() {
        let lines = cartesian(-3.0, 3.0, 13, 64);
        let identity: Vec<f32> = lines
            .points
            .chunks(2)
            .flat_map(|p| [p[0] as f32, p[1] as f32, 0.0])
            .collect();
        let mut grid = DeformedGrid::new(&lines, &identity);
        assert!(grid.splits(&rule(10 * lines.len())).is_empty());
        let mut sheared = DeformedGrid::new(&lines, &swirl(&lines.points));
        let budget = lines.len() + 40;
        sheared.refine(&rule(budget), swirl);
        assert!(sheared.len() <= budget);
        grid.refine(&rule(budget), |_| panic!("nothing to push"));
        assert_eq!(grid.len(), lines.len());
    }

    /// Segments whose images lie outside the view, or are not finite, are
    /// left alone.
    #[test]
    fn refinement_ignores_what_is_not_drawn() {
        let lines = cartesian(-3.0, 3.0, 13, 64);
        let far: Vec<f32> = swirl(&lines.points)
            .chunks(3)
            .flat_map(|p| [p[0] + 100.0, p[1], p[2]])
            .collect();
        assert!(
            DeformedGrid::new(&lines, &far)
                .splits(&rule(10_000))
                .is_empty()
        );
        let nan = vec![f32::NAN; 3 * lines.len()];
        assert!(
            DeformedGrid::new(&lines, &nan)
                .splits(&rule(10_000))
                .is_empty()
        );
    }
}
