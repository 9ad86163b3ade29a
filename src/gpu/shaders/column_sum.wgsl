// Sums per-sample losses and gradients over the batch: one thread per entry,
// each summing its column (WGSL has no float atomics).

struct Sizes {
    n: u32,        // samples
    entries: u32,  // 1 + parameters (the loss comes first)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> sizes: Sizes;
@group(0) @binding(1) var<storage, read> per_sample: array<f32>;
@group(0) @binding(2) var<storage, read_write> total: array<f32>;

@compute @workgroup_size(64)
fn reduce_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let j = id.x;
    if (j >= sizes.entries) {
        return;
    }
    var s = 0.0;
    for (var i = 0u; i < sizes.n; i++) {
        s += per_sample[i * sizes.entries + j];
    }
    total[j] = s;
}
