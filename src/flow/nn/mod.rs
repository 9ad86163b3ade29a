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
    gelu_prime_from_gate(x, gelu_gate(x))
}

/// [`gelu_prime`] at `x` from its gate `s` = [`gelu_gate`]`(x)`, so a backward
/// pass reuses the gates of its forward pass instead of new exponentials.
#[inline(always)]
pub fn gelu_prime_from_gate<T: Real>(x: T, s: T) -> T {
    let k = T::c((2.0 / std::f64::consts::PI).sqrt());
    s + x * s * (T::one() - s) * T::c(2.0) * k * (T::one() + T::c(3.0 * 0.044715) * x * x)
}

/// Replaces every `x` by its GELU gate `sigma(2y)` (so `gelu(x) = x * gate`).
///
/// Float32 runs as vector instructions: `sigma(t) = 1 / (1 + e^-t)` with the
/// exponentials of a block at once ([`Real::exp_in_place`]) and `t` held to
/// [-87, 87], where `e^-t` stays finite; beyond it the gate is below 2e-38
/// or 1 to float32 precision anyway. A NaN input still gives a NaN `gelu`,
/// through its `x`. Float64 keeps the scalar rule, value for value.
#[inline(always)]
pub fn gelu_gates_in_place<T: Real>(values: &mut [T]) {
    if !T::IS_F32 {
        values.iter_mut().for_each(|v| *v = gelu_gate(*v));
        return;
    }
    let k2 = T::c(2.0 * (2.0 / std::f64::consts::PI).sqrt());
    let (low, high) = (T::c(-87.0), T::c(87.0));
    for block in values.chunks_mut(64) {
        for v in block.iter_mut() {
            let x = *v;
            let t = k2 * (x + T::c(0.044715) * x * x * x);
            // min/max written as selects, which vectorize
            let t = if t < low { low } else { t };
            let t = if t > high { high } else { t };
            *v = -t;
        }
        T::exp_in_place(block);
        for v in block.iter_mut() {
            *v = T::one() / (T::one() + *v);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_gates_match_the_scalar_gate() {
        let xs: Vec<f64> = (-400..=400).map(|i| i as f64 * 0.025).collect();
        // float64: the scalar rule, value for value
        let mut gates64 = xs.clone();
        gelu_gates_in_place(&mut gates64);
        for (&x, &s) in xs.iter().zip(&gates64) {
            assert_eq!(s, gelu_gate(x), "x = {x}");
        }
        // float32: within a few float32 roundings of the exact gate; where
        // the exact gate is tiny (t held to [-87, 87] puts it near float32's
        // smallest normal number), within 2e-38 of it
        let mut xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        xs32.extend([-1e3f32, -60.0, 60.0, 1e3]);
        let mut gates32 = xs32.clone();
        gelu_gates_in_place(&mut gates32);
        for (&x, &s) in xs32.iter().zip(&gates32) {
            let exact = gelu_gate(x as f64);
            let err = (s as f64 - exact).abs();
            // t itself carries float32 rounding of relative size eps, which
            // the gate's relative error inherits times |t| where it is tiny
            let xd = x as f64;
            let t = 2.0 * (2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd.powi(3));
            let bound = if exact > 1e-36 {
                4.0 * f32::EPSILON as f64 * exact * (1.0 + t.abs())
            } else {
                2e-38
            };
            assert!(err <= bound, "x = {x}: {s} against {exact}");
            assert_eq!(gelu(x), x * gelu_gate(x));
        }
        // a NaN input still makes a NaN activation and derivative
        let mut nan = [f32::NAN; 3];
        gelu_gates_in_place(&mut nan);
        assert!((f32::NAN * nan[0]).is_nan());
        assert!(gelu_prime_from_gate(f32::NAN, nan[0]).is_nan());
    }

    #[test]
    fn the_derivative_from_a_gate_is_the_derivative() {
        for i in -50..=50 {
            let x = i as f64 * 0.2;
            assert_eq!(gelu_prime_from_gate(x, gelu_gate(x)), gelu_prime(x));
            // and it is the slope of gelu
            let h = 1e-6;
            let slope = (gelu(x + h) - gelu(x - h)) / (2.0 * h);
            assert!((slope - gelu_prime(x)).abs() < 1e-8, "x = {x}");
        }
    }
}
