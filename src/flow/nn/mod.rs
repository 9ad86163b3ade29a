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
