// Radial flows on the GPU: the density direction with its reverse mode, one
// thread per sample, mirroring src/flow/radial.rs. The Rust side fills in the
// structure constants below (dimension, stack, family, conditioner).

#import lib/stack.wgsl
#import lib/energy.wgsl

const D: u32 = {D}u;          // data dimension
const ORDER: u32 = {ORDER}u;  // Fourier order (0: direct flow)
const NF: u32 = 2u * ORDER + 1u;
const NPARAMS: u32 = {NPARAMS}u;
const EPS: f32 = 1e-7;
const PI: f32 = 3.141592653589793;

struct Settings {
    n: u32,          // samples in the batch
    inv_n: f32,      // 1 / n (the loss is a mean)
    density_only: u32, // 1: write log q(x) to log_q and stop (display grids)
    pad1: u32,
}

@group(0) @binding(0) var<uniform> settings: Settings;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> points: array<f32>;
// per sample: the loss term (-log q), then NPARAMS gradient entries
@group(0) @binding(3) var<storage, read_write> per_sample: array<f32>;
// per point: log q (density_only)
@group(0) @binding(4) var<storage, read_write> log_q: array<f32>;

var<private> trace0: array<f32, K>;
var<private> phi: array<f32, 33>;

// ---- the conditioner: raw parameters for direction u

fn body(j: u32) -> f32 {
    return params[2u * D + j];
}

// The direction's angle in (0, 2 pi], as the CPU: at the centre itself (u = 0)
// atan2 is undefined in WGSL, and Rust's atan2(0, 0) = 0 gives pi.
fn angle_of(u: vec2<f32>) -> f32 {
    if (u.x == 0.0 && u.y == 0.0) {
        return PI;
    }
    return atan2(u.y, u.x) + PI;
}

fn condition(u: vec2<f32>) {
    if (ORDER == 0u) {
        for (var q = 0u; q < NRAW; q++) {
            raw[q] = body(q);
        }
        return;
    }
    let t = angle_of(u);
    for (var k = 1u; k <= ORDER; k++) {
        let kt = f32(k) * t;
        phi[k - 1u] = sin(kt) / f32(k);
        phi[ORDER + k - 1u] = cos(kt) / f32(k);
    }
    phi[2u * ORDER] = 1.0;
    for (var q = 0u; q < NRAW; q++) {
        var s = 0.0;
        for (var f = 0u; f < NF; f++) {
            s += body(f * NRAW + q) * phi[f];
        }
        raw[q] = s;
    }
}

// S (p - c) of this thread's point
var<private> w: array<f32, D>;

// The first phase of every direction: w = S (p - c) for point i, its norm r and
// direction u (2D), and the stack's raw parameters for that direction.
// Returns (r, u).
fn geometry(i: u32) -> vec3<f32> {
    var r2 = EPS * EPS;
    for (var j = 0u; j < D; j++) {
        w[j] = exp(params[D + j]) * (points[i * D + j] - params[j]);
        r2 += w[j] * w[j];
    }
    let r = sqrt(r2);
    var u = vec2<f32>(0.0, 0.0);
    if (D == 2u) {
        u = vec2<f32>(w[0] / r, w[min(1u, D - 1u)] / r);
    }
    condition(u);
    return vec3<f32>(r, u);
}

// f(0) through the stack (f~(r) = f(r) - f(0)), recording each layer's input.
fn offset_chain() -> f32 {
    var v = 0.0;
    for (var k = 0u; k < K; k++) {
        trace0[k] = v;
        v = layer_forward(k, v).x;
    }
    return v;
}

// f(r) - f(0) as differences along the chain at 0 (trace0 must hold it).
fn offset_difference(r: f32, f0: f32) -> f32 {
    var d = r;
    for (var k = 0u; k < K; k++) {
        var y0 = f0;
        if (k + 1u < K) {
            y0 = trace0[k + 1u];
        }
        d = layer_diff(k, trace0[k], y0, d);
    }
    return d;
}

// The last phase of both backward passes: the stack's raw adjoints into the
// body's gradient, the direction's adjoint into w_bar, then w = S (p - c) into
// the centre and log-scale gradients (src/flow/radial.rs `geometry_backward`).
fn geometry_backward(base: u32, u: vec2<f32>, r_in: f32, w: array<f32, D>, w_bar_in: array<f32, D>) {
    var w_bar = w_bar_in;
    let gb = base + 1u + 2u * D;
    if (ORDER == 0u) {
        for (var q = 0u; q < NRAW; q++) {
            per_sample[gb + q] = raw_bar[q];
        }
    } else {
        let t = angle_of(u);
        var t_bar = 0.0;
        for (var f = 0u; f < NF; f++) {
            var dphi = 0.0;
            if (f < ORDER) {
                dphi = cos(f32(f + 1u) * t);
            } else if (f < 2u * ORDER) {
                dphi = -sin(f32(f + 1u - ORDER) * t);
            }
            var dot = 0.0;
            for (var q = 0u; q < NRAW; q++) {
                per_sample[gb + f * NRAW + q] = raw_bar[q] * phi[f];
                dot += body(f * NRAW + q) * raw_bar[q];
            }
            t_bar += dot * dphi;
        }
        let ub = vec2<f32>(-u.y * t_bar, u.x * t_bar);
        let dotu = ub.x * u.x + ub.y * u.y;
        w_bar[0] += (ub.x - dotu * u.x) / r_in;
        w_bar[min(1u, D - 1u)] += (ub.y - dotu * u.y) / r_in;
    }
    for (var j = 0u; j < D; j++) {
        per_sample[base + 1u + j] -= exp(params[D + j]) * w_bar[j];
        per_sample[base + 1u + D + j] += w_bar[j] * w[j];
    }
}

// ---- the density direction of one sample, with its reverse mode

@compute @workgroup_size(64)
fn grad_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= settings.n) {
        return;
    }
    var w_bar: array<f32, D>;
    let g = geometry(i);
    let r_in = g.x;
    let u = g.yz;
    let f0 = offset_chain();
    // r = f^-1(r_in + f(0))
    let top = r_in + f0;
    var y = top;
    var logd = 0.0;
    for (var kk = 0u; kk < K; kk++) {
        let k = K - 1u - kk;
        let zl = layer_inverse(k, y);
        trace[k] = zl.x;
        logd += zl.y;
        y = zl.x;
    }
    var r = y;
    if (needs_differences(f0, r_in)) {
        // near the centre r_in + f(0) dropped r_in's low bits: redo the chain as
        // differences from the chain at 0
        var e = r_in;
        for (var kk = 0u; kk < K; kk++) {
            let k = K - 1u - kk;
            var y0 = f0;
            if (k + 1u < K) {
                y0 = trace0[k + 1u];
            }
            e = layer_inv_diff(k, trace0[k], y0, e);
            trace[k] = trace0[k] + e;
        }
        r = e;
    }
    let ratio = r / r_in;
    let dm1 = f32(D - 1u);
    let ld = -logd + dm1 * log(ratio);
    let base = i * (NPARAMS + 1u);
    var sq = 0.0;
    var z: array<f32, D>;
    for (var j = 0u; j < D; j++) {
        z[j] = params[j] + exp(-params[D + j]) * ratio * w[j];
        sq += z[j] * z[j];
    }
    if (settings.density_only == 1u) {
        log_q[i] = -0.5 * sq - 0.5 * f32(D) * log(2.0 * PI) + ld;
        return;
    }
    // -log q = |z|^2 / 2 + (D/2) log(2 pi) - ld, averaged over the batch
    per_sample[base] = (0.5 * sq + 0.5 * f32(D) * log(2.0 * PI) - ld) * settings.inv_n;
    let ld_bar = -settings.inv_n;
    var ratio_bar = ld_bar * dm1 / ratio;
    for (var j = 0u; j < D; j++) {
        let zb = z[j] * settings.inv_n;
        per_sample[base + 1u + j] = zb; // centre
        let q = exp(-params[D + j]) * zb;
        per_sample[base + 1u + D + j] = -q * ratio * w[j]; // log-scale
        ratio_bar += q * w[j];
        w_bar[j] = ratio * q;
    }
    for (var q = 0u; q < NRAW; q++) {
        raw_bar[q] = 0.0;
    }
    var bar = ratio_bar / r_in;
    var r_in_bar = -ratio_bar * r / (r_in * r_in);
    for (var k = 0u; k < K; k++) {
        var out = top;
        if (k + 1u < K) {
            out = trace[k + 1u];
        }
        bar = z_from_x_vjp(k, trace[k], out, bar, ld_bar);
    }
    r_in_bar += bar;
    var bar0 = bar;
    for (var kk = 0u; kk < K; kk++) {
        let k = K - 1u - kk;
        var out = f0;
        if (k + 1u < K) {
            out = trace0[k + 1u];
        }
        bar0 = x_from_z_vjp(k, trace0[k], out, bar0, 0.0);
    }
    for (var j = 0u; j < D; j++) {
        w_bar[j] += r_in_bar * w[j] / r_in;
    }
    geometry_backward(base, u, r_in, w, w_bar);
}

// ---- the sampling direction: latent points pushed through x_from_z, with
// log |det dx/dz| (samples, and the deformed grid's polylines and shading)

@group(0) @binding(5) var<storage, read_write> pushed: array<f32>; // per point: x (D), log det

@compute @workgroup_size(64)
fn push_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= settings.n) {
        return;
    }
    let r = geometry(i).x;
    let v0 = offset_chain();
    var v = r;
    var logd = 0.0;
    for (var k = 0u; k < K; k++) {
        let y = layer_forward(k, v);
        v = y.x;
        logd += y.y;
    }
    var r_out = v - v0;
    if (needs_differences(v0, r_out)) {
        r_out = offset_difference(r, v0);
    }
    let ratio = r_out / r;
    let base = i * (D + 1u);
    for (var j = 0u; j < D; j++) {
        pushed[base + j] = params[j] + exp(-params[D + j]) * ratio * w[j];
    }
    pushed[base + D] = logd + f32(D - 1u) * log(ratio);
}

// ---- the sampling direction with its reverse mode: reverse KL,
// mean(log N(z) - log det - log p~(x)), z drawn on the CPU (points buffer)

@compute @workgroup_size(64)
fn grad_reverse_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= settings.n) {
        return;
    }
    var w_bar: array<f32, D>;
    var zsq = 0.0;
    for (var j = 0u; j < D; j++) {
        zsq += points[i * D + j] * points[i * D + j];
    }
    let g = geometry(i);
    let r = g.x;
    let u = g.yz;
    let f0 = offset_chain();
    var v = r;
    var logd = 0.0;
    for (var k = 0u; k < K; k++) {
        trace[k] = v;
        let y = layer_forward(k, v);
        v = y.x;
        logd += y.y;
    }
    let f_r = v;
    var r_out = f_r - f0;
    if (needs_differences(f0, r_out)) {
        r_out = offset_difference(r, f0);
    }
    let ratio = r_out / r;
    let dm1 = f32(D - 1u);
    let ld = logd + dm1 * log(ratio);
    var x = vec2<f32>(0.0, 0.0);
    for (var j = 0u; j < D; j++) {
        x[j] = params[j] + exp(-params[D + j]) * ratio * w[j];
    }
    let e = energy(x);
    let base = i * (NPARAMS + 1u);
    per_sample[base] = (-0.5 * zsq - 0.5 * f32(D) * log(2.0 * PI) - ld - e.x) * settings.inv_n;
    let ld_bar = -settings.inv_n;
    var ratio_bar = ld_bar * dm1 / ratio;
    for (var j = 0u; j < D; j++) {
        let xb = -e[j + 1u] * settings.inv_n;
        per_sample[base + 1u + j] = xb;
        let q = exp(-params[D + j]) * xb;
        per_sample[base + 1u + D + j] = -q * ratio * w[j];
        ratio_bar += q * w[j];
        w_bar[j] = ratio * q;
    }
    for (var q = 0u; q < NRAW; q++) {
        raw_bar[q] = 0.0;
    }
    let r_out_bar = ratio_bar / r;
    var r_bar = -ratio_bar * r_out / (r * r);
    var bar = r_out_bar;
    for (var kk = 0u; kk < K; kk++) {
        let k = K - 1u - kk;
        var out = f_r;
        if (k + 1u < K) {
            out = trace[k + 1u];
        }
        bar = x_from_z_vjp(k, trace[k], out, bar, ld_bar);
    }
    r_bar += bar;
    var bar0 = -r_out_bar;
    for (var kk = 0u; kk < K; kk++) {
        let k = K - 1u - kk;
        var out = f0;
        if (k + 1u < K) {
            out = trace0[k + 1u];
        }
        bar0 = x_from_z_vjp(k, trace0[k], out, bar0, 0.0);
    }
    for (var j = 0u; j < D; j++) {
        w_bar[j] += r_bar * w[j] / r;
    }
    geometry_backward(base, u, r, w, w_bar);
}
