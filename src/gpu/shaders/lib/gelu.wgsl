// The conditioners' activation (src/flow/nn/mod.rs): gelu in its tanh form,
// written with a sigmoid, and its derivative.

#import lib/scalar.wgsl

const GELU_K: f32 = 0.7978845608028654; // sqrt(2 / pi)

fn gelu_gate(x: f32) -> f32 {
    return sigmoid(2.0 * GELU_K * (x + 0.044715 * x * x * x));
}

fn gelu(x: f32) -> f32 {
    return x * gelu_gate(x);
}

fn gelu_prime(x: f32) -> f32 {
    let s = gelu_gate(x);
    return s + x * s * (1.0 - s) * 2.0 * GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
}
