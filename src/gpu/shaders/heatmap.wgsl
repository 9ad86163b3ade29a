// The model view's heat map, coloured where the density was computed: the
// peak of log q over the view's texels (one workgroup), then every texel
// coloured by the page's density colour map (viridis by its control points,
// as app::widgets::colour::colour draws it on the CPU, to the same bytes).

struct Heat {
    n: u32,       // texels a side; log_q is n x n, row 0 the view's top
    linear: u32,  // 1: q / max q; 0: log q over the 12 nats below the peak
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> heat: Heat;
@group(0) @binding(1) var<storage, read> log_q: array<f32>;
@group(0) @binding(2) var<storage, read_write> peak: array<f32>;
@group(0) @binding(3) var picture: texture_storage_2d<rgba8unorm, write>;

var<workgroup> best: array<f32, 256>;

fn is_finite(v: f32) -> bool {
    // a bit test: compilers may assume arithmetic never produces NaN
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

@compute @workgroup_size(256)
fn peak_main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    var m = -3.0e38;
    for (var i = t; i < heat.n * heat.n; i += 256u) {
        let v = log_q[i];
        if (is_finite(v)) {
            m = max(m, v);
        }
    }
    best[t] = m;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (t < w) {
            best[t] = max(best[t], best[t + w]);
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        peak[0] = best[0];
    }
}

// The colour map's control points, in bytes.
const STOPS = array<vec3<f32>, 6>(
    vec3<f32>(68.0, 1.0, 84.0),
    vec3<f32>(65.0, 68.0, 135.0),
    vec3<f32>(42.0, 120.0, 142.0),
    vec3<f32>(34.0, 168.0, 132.0),
    vec3<f32>(122.0, 209.0, 81.0),
    vec3<f32>(253.0, 231.0, 37.0),
);

@compute @workgroup_size(8, 8)
fn colour_main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= heat.n || id.y >= heat.n) {
        return;
    }
    let v = log_q[id.y * heat.n + id.x];
    let top = peak[0];
    var t = (v - (top - 12.0)) / 12.0;
    if (heat.linear == 1u) {
        t = exp(v - top);
    }
    if (!is_finite(v) || !is_finite(t)) {
        t = 0.0;
    }
    let x = clamp(t, 0.0, 1.0) * 5.0;
    let i = min(u32(floor(x)), 4u);
    let f = x - f32(i);
    // (a variable: indexed at run time)
    var stops = STOPS;
    // whole bytes, cut as the CPU's `as u8` cuts them
    let rgb = floor(stops[i] * (1.0 - f) + stops[i + 1u] * f);
    textureStore(picture, vec2<i32>(id.xy), vec4<f32>(rgb / 255.0, 1.0));
}
