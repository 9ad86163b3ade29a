//! phi^4 lattice field theory (docs/mathematics.md, section 8): a real scalar field on an
//! L x L periodic lattice with `p(phi) ~ exp(-S(phi))`, in the standard
//! convention (m^2, lambda; bijx's, no factor 1/2)
//!
//! `S = sum_x [ sum_mu (phi_{x+mu} - phi_x)^2 + m^2 phi_x^2 + lambda phi_x^4 ]`
//!
//! or the hopping one (kappa, lambda_h) for the field `psi = phi / sqrt(kappa)`,
//! with the conversion both ways. Sites are numbered row-major: `x = row * L + col`.

use super::TargetError;

/// The couplings in the standard convention.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Couplings {
    pub m2: f64,
    pub lambda: f64,
}

/// Lattice dimension (the lattices here are 2D).
const DIM: f64 = 2.0;

impl Couplings {
    /// From the hopping convention: `m^2 = (1 - 2 lambda_h) / kappa - 2d`,
    /// `lambda = lambda_h / kappa^2`.
    pub fn from_hopping(kappa: f64, lambda_h: f64) -> Result<Self, TargetError> {
        let valid = kappa > 0.0 && kappa.is_finite() && lambda_h >= 0.0 && lambda_h.is_finite();
        if !valid {
            return Err(TargetError::Hopping { kappa, lambda_h });
        }
        Ok(Self {
            m2: (1.0 - 2.0 * lambda_h) / kappa - 2.0 * DIM,
            lambda: lambda_h / (kappa * kappa),
        })
    }

    /// The same couplings in the hopping convention, `(kappa, lambda_h)`:
    /// kappa solves `2 lambda kappa^2 + (m^2 + 2d) kappa - 1 = 0` (the positive root).
    pub fn to_hopping(&self) -> Option<(f64, f64)> {
        let b = self.m2 + 2.0 * DIM;
        let kappa = if self.lambda == 0.0 {
            (b > 0.0).then(|| 1.0 / b)?
        } else {
            // the stable form of the positive root
            2.0 / (b + (b * b + 8.0 * self.lambda).sqrt())
        };
        (kappa > 0.0 && kappa.is_finite()).then_some((kappa, self.lambda * kappa * kappa))
    }

    /// Whether the action is bounded below (a normalizable target).
    pub fn validate(&self) -> Result<(), TargetError> {
        if !(self.m2.is_finite() && self.lambda.is_finite()) {
            return Err(TargetError::NonFiniteCouplings);
        }
        if self.lambda < 0.0 || (self.lambda == 0.0 && self.m2 <= 0.0) {
            return Err(TargetError::Unbounded {
                m2: self.m2,
                lambda: self.lambda,
            });
        }
        Ok(())
    }
}

/// phi^4 on an L x L periodic lattice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phi4 {
    /// sites per side
    pub size: usize,
    pub couplings: Couplings,
}

impl Phi4 {
    pub fn new(size: usize, couplings: Couplings) -> Result<Self, TargetError> {
        if size < 2 {
            return Err(TargetError::LatticeTooSmall(size));
        }
        couplings.validate()?;
        Ok(Self { size, couplings })
    }

    /// Sites on the lattice.
    pub fn volume(&self) -> usize {
        self.size * self.size
    }

    /// The neighbours of site `x` one step forward in each direction.
    fn forward(&self, x: usize) -> [usize; 2] {
        let l = self.size;
        let (row, col) = (x / l, x % l);
        [row * l + (col + 1) % l, ((row + 1) % l) * l + col]
    }

    /// The action `S(phi)`.
    pub fn action(&self, phi: &[f64]) -> f64 {
        let Couplings { m2, lambda } = self.couplings;
        (0..self.volume())
            .map(|x| {
                let p = phi[x];
                let kinetic: f64 = self.forward(x).iter().map(|&y| (phi[y] - p).powi(2)).sum();
                kinetic + m2 * p * p + lambda * p.powi(4)
            })
            .sum()
    }

    /// The action and its gradient `dS/dphi` (written into `grad`).
    pub fn action_grad(&self, phi: &[f64], grad: &mut [f64]) -> f64 {
        let Couplings { m2, lambda } = self.couplings;
        for (g, &p) in grad.iter_mut().zip(phi) {
            *g = 2.0 * m2 * p + 4.0 * lambda * p * p * p;
        }
        let mut s = 0.0;
        for x in 0..self.volume() {
            let p = phi[x];
            s += m2 * p * p + lambda * p.powi(4);
            // each link (x, x + mu) once: (phi_y - phi_x)^2
            for y in self.forward(x) {
                let d = phi[y] - p;
                s += d * d;
                grad[y] += 2.0 * d;
                grad[x] -= 2.0 * d;
            }
        }
        s
    }

    /// The action in the hopping convention of the field `psi`.
    pub fn hopping_action(&self, kappa: f64, lambda_h: f64, psi: &[f64]) -> f64 {
        (0..self.volume())
            .map(|x| {
                let p = psi[x];
                let hop: f64 = self.forward(x).iter().map(|&y| psi[y]).sum();
                -2.0 * kappa * p * hop + (1.0 - 2.0 * lambda_h) * p * p + lambda_h * p.powi(4)
            })
            .sum()
    }

    /// The magnetization `M = sum_x phi_x`.
    pub fn magnetization(phi: &[f64]) -> f64 {
        phi.iter().sum()
    }

    /// `(1/V) sum_y phi_y phi_{y+x}` for every displacement `x` (row-major
    /// over the L x L displacements): one configuration's two-point function.
    pub fn two_point(&self, phi: &[f64]) -> Vec<f64> {
        let l = self.size;
        let v = self.volume();
        let mut g = vec![0.0; v];
        for (d, out) in g.iter_mut().enumerate() {
            let (dr, dc) = (d / l, d % l);
            let mut sum = 0.0;
            for y in 0..v {
                let (r, c) = (y / l, y % l);
                sum += phi[y] * phi[((r + dr) % l) * l + (c + dc) % l];
            }
            *out = sum / v as f64;
        }
        g
    }

    /// The free field's (lambda = 0) exact two-point function
    /// `<phi_0 phi_x> = (1/2V) sum_p e^{ipx} / (phat^2 + m^2)`, with
    /// `phat^2 = sum_mu 4 sin^2(p_mu / 2)` (the action has no factor 1/2).
    pub fn free_two_point(&self) -> Option<Vec<f64>> {
        let m2 = self.couplings.m2;
        if self.couplings.lambda != 0.0 || m2 <= 0.0 {
            return None;
        }
        let l = self.size;
        let v = self.volume() as f64;
        let k = |n: usize| std::f64::consts::TAU * n as f64 / l as f64;
        Some(
            (0..self.volume())
                .map(|d| {
                    let (dr, dc) = (d / l, d % l);
                    let mut sum = 0.0;
                    for a in 0..l {
                        for b in 0..l {
                            let phat2 =
                                4.0 * (k(a) / 2.0).sin().powi(2) + 4.0 * (k(b) / 2.0).sin().powi(2);
                            sum += (k(a) * dr as f64 + k(b) * dc as f64).cos() / (phat2 + m2);
                        }
                    }
                    sum / (2.0 * v)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn field(v: usize, seed: u64) -> Vec<f64> {
        let mut rng = Rng::seeded(seed);
        (0..v).map(|_| rng.normal()).collect()
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        for (size, m2, lambda) in [(4, -4.0, 8.0), (5, 0.7, 0.0), (3, 1.5, 0.3)] {
            let model = Phi4::new(size, Couplings { m2, lambda }).unwrap();
            let phi = field(model.volume(), size as u64);
            let mut grad = vec![0.0; phi.len()];
            let s = model.action_grad(&phi, &mut grad);
            assert!((s - model.action(&phi)).abs() < 1e-10 * s.abs().max(1.0));
            for x in 0..phi.len() {
                let h = 1e-6;
                let mut up = phi.clone();
                up[x] += h;
                let mut down = phi.clone();
                down[x] -= h;
                let fd = (model.action(&up) - model.action(&down)) / (2.0 * h);
                assert!(
                    (fd - grad[x]).abs() < 1e-6 * fd.abs().max(1.0),
                    "site {x}: {fd} vs {}",
                    grad[x]
                );
            }
        }
    }

    #[test]
    fn both_conventions_give_the_same_action() {
        for (kappa, lambda_h) in [(0.3, 0.02), (0.26, 0.0), (0.5, 1.1)] {
            let c = Couplings::from_hopping(kappa, lambda_h).unwrap();
            let (k2, l2) = c.to_hopping().unwrap();
            assert!((k2 - kappa).abs() < 1e-12 && (l2 - lambda_h).abs() < 1e-12);
            let model = Phi4 {
                size: 4,
                couplings: c,
            };
            let psi = field(16, 3);
            let phi: Vec<f64> = psi.iter().map(|p| p * kappa.sqrt()).collect();
            let standard = model.action(&phi);
            let hopping = model.hopping_action(kappa, lambda_h, &psi);
            assert!((standard - hopping).abs() < 1e-10 * standard.abs().max(1.0));
        }
        // the paper's symmetric point in both conventions
        let c = Couplings {
            m2: -4.0,
            lambda: 8.0,
        };
        let (kappa, lambda_h) = c.to_hopping().unwrap();
        let back = Couplings::from_hopping(kappa, lambda_h).unwrap();
        assert!((back.m2 + 4.0).abs() < 1e-12 && (back.lambda - 8.0).abs() < 1e-12);
    }

    #[test]
    fn unbounded_actions_are_refused() {
        assert!(
            Phi4::new(
                8,
                Couplings {
                    m2: -1.0,
                    lambda: 0.0
                }
            )
            .is_err()
        );
        assert!(
            Phi4::new(
                8,
                Couplings {
                    m2: 1.0,
                    lambda: -0.1
                }
            )
            .is_err()
        );
        assert!(
            Phi4::new(
                1,
                Couplings {
                    m2: 1.0,
                    lambda: 0.1
                }
            )
            .is_err()
        );
        assert!(Couplings::from_hopping(-0.1, 0.0).is_err());
    }

    #[test]
    fn the_free_two_point_function_sums_to_the_zero_mode() {
        // sum_x G(x) = 1 / (2 m^2): only p = 0 survives the sum
        let model = Phi4::new(
            6,
            Couplings {
                m2: 0.8,
                lambda: 0.0,
            },
        )
        .unwrap();
        let g = model.free_two_point().unwrap();
        let sum: f64 = g.iter().sum();
        assert!((sum - 1.0 / (2.0 * 0.8)).abs() < 1e-12);
        // symmetric under x -> -x
        assert!((g[1] - g[5]).abs() < 1e-12 && (g[6] - g[30]).abs() < 1e-12);
    }
}
