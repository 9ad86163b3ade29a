//! What the flows learn: sample targets (forward KL), unnormalized densities
//! (reverse KL), and images as densities (docs/mathematics.md, section 7).

pub mod energy;
pub mod error;
pub mod image;
pub mod phi4;
pub mod toy;

pub use error::TargetError;
pub use image::ImageDensity;

use crate::rng::Rng;

/// A target distribution.
#[derive(Clone, Debug)]
pub enum Target {
    Moons,
    EightGaussians,
    Rings,
    Circles,
    Pinwheel,
    TwoSpirals,
    Checkerboard,
    Swissroll,
    Spiral,
    Line,
    Cos,
    Annulus,
    Image(ImageDensity),
    /// bijx's 1D demo density (reverse KL)
    Poly1d,
    TwoMoonsEnergy,
    CircularGmm,
    RingMixture {
        rings: usize,
    },
    /// phi^4 on a periodic lattice: the field is the point (reverse KL)
    Phi4(phi4::Phi4),
}

/// Whether a target is learned from samples or from its density.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TargetKind {
    Samples,
    Energy,
}

impl Target {
    /// The names of every built-in target, as the CLI and the URL spell them.
    pub const NAMES: [&'static str; 16] = [
        "moons",
        "8gaussians",
        "rings",
        "circles",
        "pinwheel",
        "2spirals",
        "checkerboard",
        "swissroll",
        "spiral",
        "line",
        "cos",
        "annulus",
        "poly1d",
        "twomoons-energy",
        "circular-gmm",
        "ring-mixture",
    ];

    /// A built-in target by name (images come from [`Target::Image`]); phi^4
    /// as `phi4:L=8,m2=-4,lambda=8` (or `kappa=..,lambda_h=..`).
    pub fn parse(name: &str) -> Result<Target, TargetError> {
        if let Some(spec) = name.strip_prefix("phi4") {
            return parse_phi4(spec.trim_start_matches(':')).map(Target::Phi4);
        }
        Ok(match name {
            "moons" => Target::Moons,
            "8gaussians" => Target::EightGaussians,
            "rings" => Target::Rings,
            "circles" => Target::Circles,
            "pinwheel" => Target::Pinwheel,
            "2spirals" => Target::TwoSpirals,
            "checkerboard" => Target::Checkerboard,
            "swissroll" => Target::Swissroll,
            "spiral" => Target::Spiral,
            "line" => Target::Line,
            "cos" => Target::Cos,
            "annulus" => Target::Annulus,
            "poly1d" => Target::Poly1d,
            "twomoons-energy" => Target::TwoMoonsEnergy,
            "circular-gmm" => Target::CircularGmm,
            "ring-mixture" => Target::RingMixture { rings: 2 },
            _ => {
                return Err(TargetError::Unknown {
                    name: name.to_string(),
                    expected: Target::NAMES.join(", "),
                });
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Target::Moons => "moons",
            Target::EightGaussians => "8gaussians",
            Target::Rings => "rings",
            Target::Circles => "circles",
            Target::Pinwheel => "pinwheel",
            Target::TwoSpirals => "2spirals",
            Target::Checkerboard => "checkerboard",
            Target::Swissroll => "swissroll",
            Target::Spiral => "spiral",
            Target::Line => "line",
            Target::Cos => "cos",
            Target::Annulus => "annulus",
            Target::Image(_) => "image",
            Target::Poly1d => "poly1d",
            Target::TwoMoonsEnergy => "twomoons-energy",
            Target::CircularGmm => "circular-gmm",
            Target::RingMixture { .. } => "ring-mixture",
            Target::Phi4(_) => "phi4",
        }
    }

    /// Where the target comes from, for labels.
    pub fn source(&self) -> &'static str {
        match self {
            Target::Spiral | Target::Poly1d => "bijx demo",
            Target::Line | Target::Cos => "FFJORD toy data (degenerate: no density)",
            Target::Annulus => "radial-structure target",
            Target::Image(_) => "image as density (Neural Spline Flows' idea)",
            Target::TwoMoonsEnergy | Target::CircularGmm | Target::RingMixture { .. } => {
                "normflows energy target"
            }
            Target::Phi4(_) => "phi^4 lattice field theory (docs/mathematics.md, section 8)",
            _ => "FFJORD toy data",
        }
    }

    pub fn dim(&self) -> usize {
        match self {
            Target::Poly1d => 1,
            Target::Phi4(model) => model.volume(),
            _ => 2,
        }
    }

    pub fn kind(&self) -> TargetKind {
        match self {
            Target::Poly1d
            | Target::TwoMoonsEnergy
            | Target::CircularGmm
            | Target::RingMixture { .. }
            | Target::Phi4(_) => TargetKind::Energy,
            _ => TargetKind::Samples,
        }
    }

    /// `n` samples, row-major `n x dim`; `None` for energy targets.
    pub fn sample(&self, n: usize, rng: &mut Rng) -> Option<Vec<f64>> {
        let draw: fn(&mut Rng) -> [f64; 2] = match self {
            Target::Moons => toy::moons,
            Target::EightGaussians => toy::eight_gaussians,
            Target::Rings => toy::rings,
            Target::Circles => toy::circles,
            Target::Pinwheel => toy::pinwheel,
            Target::TwoSpirals => toy::two_spirals,
            Target::Checkerboard => toy::checkerboard,
            Target::Swissroll => toy::swissroll,
            Target::Spiral => toy::spiral,
            Target::Line => toy::line,
            Target::Cos => toy::cos,
            Target::Annulus => toy::annulus,
            Target::Image(img) => {
                return Some((0..n).flat_map(|_| img.sample(rng)).collect());
            }
            _ => return None,
        };
        Some((0..n).flat_map(|_| draw(rng)).collect())
    }

    /// The log-density at `x` where it is known: normalized for sample targets,
    /// unnormalized for energy targets (see [`Target::log_z`]).
    pub fn log_density(&self, x: &[f64]) -> Option<f64> {
        match self {
            Target::EightGaussians => Some(toy::eight_gaussians_log_density(x)),
            Target::Rings => Some(toy::rings_log_density(x)),
            Target::Circles => Some(toy::circles_log_density(x)),
            Target::Checkerboard => Some(toy::checkerboard_log_density(x)),
            Target::Spiral => Some(toy::spiral_log_density(x)),
            Target::Annulus => Some(toy::annulus_log_density(x)),
            Target::Image(img) => Some(img.log_density(x)),
            _ => self.log_density_grad(x).map(|(v, _)| v),
        }
    }

    /// Sample targets whose density is smooth, so they can also be learned
    /// by reverse KL (the checkerboard's and an image's are piecewise constant).
    pub fn has_smooth_density(&self) -> bool {
        matches!(
            self,
            Target::EightGaussians
                | Target::Rings
                | Target::Circles
                | Target::Spiral
                | Target::Annulus
        )
    }

    /// Whether [`Target::log_density_grad`] is available (reverse KL).
    pub fn has_density_gradient(&self) -> bool {
        self.kind() == TargetKind::Energy || self.has_smooth_density()
    }

    /// Log-density and its gradient: the energy targets' (unnormalized), and
    /// the smooth sample targets' (normalized; the gradient by central
    /// differences, accurate to about 1e-9 in float64).
    pub fn log_density_grad(&self, x: &[f64]) -> Option<(f64, Vec<f64>)> {
        if self.has_smooth_density() {
            let v = self.log_density(x)?;
            let h = 1e-5;
            let mut g = vec![0.0; 2];
            for (k, gk) in g.iter_mut().enumerate() {
                let (mut up, mut down) = ([x[0], x[1]], [x[0], x[1]]);
                up[k] += h;
                down[k] -= h;
                *gk = (self.log_density(&up)? - self.log_density(&down)?) / (2.0 * h);
            }
            return Some((v, g));
        }
        if let Target::Phi4(model) = self {
            let mut g = vec![0.0; x.len()];
            let s = model.action_grad(x, &mut g);
            g.iter_mut().for_each(|v| *v = -*v);
            return Some((-s, g));
        }
        self.energy_grad(x).map(|(v, g)| (v, g.to_vec()))
    }

    /// The 2D (and 1D) energies' log-density and gradient.
    fn energy_grad(&self, x: &[f64]) -> Option<(f64, [f64; 2])> {
        match self {
            Target::Poly1d => {
                let (v, g) = energy::poly1d(x[0]);
                Some((v, [g, 0.0]))
            }
            Target::TwoMoonsEnergy => Some(energy::two_moons(x)),
            Target::CircularGmm => Some(energy::circular_gmm(x)),
            Target::RingMixture { rings } => Some(energy::ring_mixture(x, *rings)),
            _ => None,
        }
    }

    /// log of the normalizing constant of an energy target, where known.
    pub fn log_z(&self) -> Option<f64> {
        match self {
            Target::Poly1d => Some(energy::poly1d_log_z()),
            Target::CircularGmm => Some(0.0),
            _ => None,
        }
    }

    /// Whether [`Target::log_density`] is available.
    pub fn has_density(&self) -> bool {
        !matches!(
            self,
            Target::Moons
                | Target::Pinwheel
                | Target::TwoSpirals
                | Target::Swissroll
                | Target::Line
                | Target::Cos
        )
    }
}

/// `L=8,m2=-4,lambda=8` or `L=8,kappa=0.3,lambda_h=0.02` (L defaults to 8).
fn parse_phi4(spec: &str) -> Result<phi4::Phi4, TargetError> {
    let wrong = |what: String| TargetError::Phi4Spec(what);
    let mut size = 8usize;
    let (mut m2, mut lambda, mut kappa, mut lambda_h) = (None, None, None, None);
    for pair in spec.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| wrong(format!("expected key=value, got '{pair}'")))?;
        let number = || {
            value
                .parse::<f64>()
                .map_err(|_| wrong(format!("{key} must be a number, got '{value}'")))
        };
        match key {
            "L" => {
                size = value
                    .parse()
                    .map_err(|_| wrong(format!("L must be a whole number, got '{value}'")))?
            }
            "m2" => m2 = Some(number()?),
            "lambda" => lambda = Some(number()?),
            "kappa" => kappa = Some(number()?),
            "lambda_h" => lambda_h = Some(number()?),
            other => {
                return Err(wrong(format!(
                    "unknown setting '{other}' (expected L, m2, lambda, kappa, lambda_h)"
                )));
            }
        }
    }
    let couplings = match (kappa, lambda_h) {
        (None, None) => phi4::Couplings {
            m2: m2.unwrap_or(-4.0),
            lambda: lambda.unwrap_or(8.0),
        },
        _ if m2.is_some() || lambda.is_some() => {
            return Err(wrong("give m2/lambda or kappa/lambda_h, not both".into()));
        }
        (k, l) => {
            let kappa = k.ok_or_else(|| wrong("kappa is missing".into()))?;
            phi4::Couplings::from_hopping(kappa, l.unwrap_or(0.0))?
        }
    };
    phi4::Phi4::new(size, couplings)
}
