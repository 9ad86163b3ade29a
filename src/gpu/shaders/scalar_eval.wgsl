// Applies one scalar bijection (raw parameters shared by all points) to a batch:
// out[i] = f(x[i]) or f^-1(x[i]), with log f' at the point on the x_from_z side.
// The layer is lib/stack.wgsl's one-layer stack, specialized for the family.

#import lib/stack.wgsl

struct Settings {
    direction: u32,   // 0 x_from_z, 1 z_from_x
    n: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> settings: Settings;
@group(0) @binding(1) var<storage, read> raw_in: array<f32>;
@group(0) @binding(2) var<storage, read> points: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= settings.n) {
        return;
    }
    for (var q = 0u; q < NRAW; q++) {
        raw[q] = raw_in[q];
    }
    let x = points[i];
    if (settings.direction == 1u) {
        out[i] = layer_inverse(0u, x);
    } else {
        out[i] = layer_forward(0u, x);
    }
}
