// Adam (beta1 0.9, beta2 0.999, eps 1e-8, optax's rule) on GPU-resident parameters.

struct AdamSettings {
    n_params: u32,
    lr: f32,
    c1: f32,  // 1 / (1 - beta1^t)
    c2: f32,  // 1 / (1 - beta2^t)
}

@group(0) @binding(0) var<uniform> adam: AdamSettings;
@group(0) @binding(1) var<storage, read> total: array<f32>;   // loss, then gradient
@group(0) @binding(2) var<storage, read_write> params: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(64)
fn adam_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let j = id.x;
    if (j >= adam.n_params) {
        return;
    }
    let g = total[j + 1u];
    m[j] = 0.9 * m[j] + 0.1 * g;
    v[j] = 0.999 * v[j] + 0.001 * g * g;
    params[j] -= adam.lr * (m[j] * adam.c1) / (sqrt(v[j] * adam.c2) + 1e-8);
}
