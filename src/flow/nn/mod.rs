//! The conditioners' neural networks: the dense ResNet of coupling flows
//! ([`mlp`]) and the periodic convolutional ResNet of lattice flows
//! ([`conv`]), with their shared activation.

pub mod conv;
pub mod mlp;

use crate::real::Real;

/// GELU, tanh approximation (jax.nn.gelu's default, which bijx uses):
/// `0.5 x (1 + tanh(y))` with `y = sqrt(2/pi) (x + 0.044715 x^3)`, computed as
/// `x sigma(2y)` (the same value; one exponential, no cancellation).
#[inline]
pub fn gelu<T: Real>(x: T) -> T {
    x * gelu_gate(x)
}

/// `sigma(2y)`, the gate of [`gelu`].
#[inline]
fn gelu_gate<T: Real>(x: T) -> T {
    let k = T::c((2.0 / std::f64::consts::PI).sqrt());
    let y2 = T::c(2.0) * k * (x + T::c(0.044715) * x * x * x);
    crate::real::sigmoid(y2)
}

/// Derivative of [`gelu`]: `s + x s (1 - s) 2 y'(x)`, `s = sigma(2y)`.
#[inline]
pub fn gelu_prime<T: Real>(x: T) -> T {
    let k = T::c((2.0 / std::f64::consts::PI).sqrt());
    let s = gelu_gate(x);
    s + x * s * (T::one() - s) * T::c(2.0) * k * (T::one() + T::c(3.0 * 0.044715) * x * x)
}

/// The nonlinearity between a conditioner's hidden layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activation {
    /// tanh-approximated GELU (bijx's coupling conditioners).
    #[default]
    Gelu,
    /// `max(x, 0.01 x)` (flax's default slope; the phi^4 tutorial's conditioner).
    LeakyRelu,
    Tanh,
}

impl Activation {
    /// Every activation, in the order menus show them.
    pub const ALL: [Activation; 3] = [Activation::Gelu, Activation::LeakyRelu, Activation::Tanh];

    pub fn name(&self) -> &'static str {
        match self {
            Activation::Gelu => "gelu",
            Activation::LeakyRelu => "leaky_relu",
            Activation::Tanh => "tanh",
        }
    }

    pub fn parse(name: &str) -> Result<Activation, String> {
        Activation::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| format!("unknown activation '{name}' (gelu, leaky_relu, tanh)"))
    }

    #[inline]
    pub fn apply<T: Real>(&self, x: T) -> T {
        match self {
            Activation::Gelu => gelu(x),
            Activation::LeakyRelu => {
                if x >= T::zero() {
                    x
                } else {
                    T::c(LEAKY_SLOPE) * x
                }
            }
            Activation::Tanh => x.tanh(),
        }
    }

    /// The derivative at `x`.
    #[inline]
    pub fn derivative<T: Real>(&self, x: T) -> T {
        match self {
            Activation::Gelu => gelu_prime(x),
            Activation::LeakyRelu => {
                if x >= T::zero() {
                    T::one()
                } else {
                    T::c(LEAKY_SLOPE)
                }
            }
            Activation::Tanh => {
                let t = x.tanh();
                T::one() - t * t
            }
        }
    }
}

/// Slope of [`Activation::LeakyRelu`] below zero.
const LEAKY_SLOPE: f64 = 0.01;
