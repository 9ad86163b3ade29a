// Radial flows on the GPU: the density direction with its reverse mode, one
// thread per sample, mirroring src/flow/radial.rs. The Rust side fills in the
// structure constants below (dimension, stack, family, conditioner).

const D: u32 = {D}u;          // data dimension
const K: u32 = {K}u;          // layers in the stack
const P: u32 = {P}u;          // raw parameters per layer
const NRAW: u32 = K * P;
const ORDER: u32 = {ORDER}u;  // Fourier order (0: direct flow)
const NF: u32 = 2u * ORDER + 1u;
const FAMILY: u32 = {FAMILY}u; // 0 cubic rational, 1 sinh, 2 cubic, 3 affine, 4 spline
const SB: u32 = {SPLINE_BINS}u;  // spline bins (FAMILY 4)
const SBOUND: f32 = {SPLINE_BOUND};
const NPARAMS: u32 = {NPARAMS}u;
const TARGET: u32 = {TARGET}u;  // energy for reverse KL: 1 two-moons, 2 circular GMM, 3 ring mixture
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

var<private> raw: array<f32, NRAW>;
var<private> raw_bar: array<f32, NRAW>;
var<private> trace: array<f32, K>;
var<private> trace0: array<f32, K>;
// sized for every family's branch (naga rejects constant indices out of range)
var<private> f_raw: array<f32, {PF}>;
var<private> l_raw: array<f32, {PF}>;
var<private> phi: array<f32, 33>;

// ---- the rational-quadratic spline (src/bijection/spline.rs): K bins on
// [-B, B], raw (heights K, slopes K - 1, widths K), identity outside

var<private> kxs: array<f32, 17>;
var<private> kys: array<f32, 17>;
var<private> kds: array<f32, 17>;
var<private> kdd: array<f32, 17>;
var<private> kpw: array<f32, 16>;
var<private> kph: array<f32, 16>;
// derivatives of one bin evaluation with respect to (x_i, W_i, y_i, H_i, d_i, d_i+1)
var<private> loc_f: array<f32, 6>;
var<private> loc_l: array<f32, 6>;

// The knots of the layer whose raw values start at o.
fn spline_knots(o: u32) {
    let wo = o + 2u * SB - 1u;
    var mw = raw[wo];
    var mh = raw[o];
    for (var j = 1u; j < SB; j++) {
        mw = max(mw, raw[wo + j]);
        mh = max(mh, raw[o + j]);
    }
    var sw = 0.0;
    var sh = 0.0;
    for (var j = 0u; j < SB; j++) {
        kpw[j] = exp(raw[wo + j] - mw);
        kph[j] = exp(raw[o + j] - mh);
        sw += kpw[j];
        sh += kph[j];
    }
    let scale = 1.0 - 1e-3 * f32(SB);
    var aw = 0.0;
    var ah = 0.0;
    kxs[0] = -SBOUND;
    kys[0] = -SBOUND;
    for (var j = 0u; j < SB; j++) {
        kpw[j] = kpw[j] / sw;
        kph[j] = kph[j] / sh;
        aw += 1e-3 + scale * kpw[j];
        ah += 1e-3 + scale * kph[j];
        kxs[j + 1u] = -SBOUND + 2.0 * SBOUND * aw;
        kys[j + 1u] = -SBOUND + 2.0 * SBOUND * ah;
    }
    kxs[SB] = SBOUND;
    kys[SB] = SBOUND;
    let sc = LN_2 / (1.0 - 1e-3);
    kds[0] = 1.0;
    kds[SB] = 1.0;
    for (var i = 1u; i < SB; i++) {
        let r = raw[o + SB + i - 1u];
        kds[i] = 1e-3 + softplus(sc * r) / sc;
        kdd[i] = sigmoid(sc * r);
    }
}

fn spline_inside(v: f32) -> bool {
    return v > -SBOUND && v < SBOUND;
}

// The bin holding v among the x knots (or the y knots, for the inverse).
fn spline_bin(v: f32, among_y: bool) -> u32 {
    var i = 0u;
    while (i + 1u < SB && v >= select(kxs[i + 1u], kys[i + 1u], among_y)) {
        i++;
    }
    return i;
}

// (f, log f', f', d log f'/dx) in bin i; with grad, the local derivatives too.
fn spline_eval(i: u32, x: f32, with_grad: bool) -> vec4<f32> {
    let w = kxs[i + 1u] - kxs[i];
    let h = kys[i + 1u] - kys[i];
    let s = h / w;
    let d0 = kds[i];
    let d1 = kds[i + 1u];
    let xi = (x - kxs[i]) / w;
    let e = xi * (1.0 - xi);
    let num = h * (s * xi * xi + d0 * e);
    let den = s + (d0 + d1 - 2.0 * s) * e;
    let r = num / den;
    let one_m = 1.0 - xi;
    let n2 = d1 * xi * xi + 2.0 * s * e + d0 * one_m * one_m;
    let fp = s * s * n2 / (den * den);
    let num_xi = h * (2.0 * s * xi + d0 * (1.0 - 2.0 * xi));
    let den_xi = (d0 + d1 - 2.0 * s) * (1.0 - 2.0 * xi);
    let n2_xi = 2.0 * d1 * xi + 2.0 * s * (1.0 - 2.0 * xi) - 2.0 * d0 * one_m;
    let r_xi = (num_xi - r * den_xi) / den;
    let l_xi = n2_xi / n2 - 2.0 * den_xi / den;
    if (with_grad) {
        let r_s = (h * xi * xi - r * (1.0 - 2.0 * e)) / den;
        let r_h = (s * xi * xi + d0 * e) / den;
        let l_s = 2.0 / s + 2.0 * e / n2 - 2.0 * (1.0 - 2.0 * e) / den;
        loc_f = array<f32, 6>(-r_xi / w, -r_xi * xi / w - r_s * s / w, 1.0, r_h + r_s / w, (h * e - r * e) / den, -r * e / den);
        loc_l = array<f32, 6>(
            -l_xi / w,
            -l_xi * xi / w - l_s * s / w,
            0.0,
            l_s / w,
            one_m * one_m / n2 - 2.0 * e / den,
            xi * xi / n2 - 2.0 * e / den
        );
    }
    return vec4<f32>(kys[i] + r, log(fp), r_xi / w, l_xi / w);
}

fn spline_forward(x: f32) -> vec2<f32> {
    if (!spline_inside(x)) {
        return vec2<f32>(x, 0.0);
    }
    let e = spline_eval(spline_bin(x, false), x, false);
    return e.xy;
}

fn spline_inverse(y: f32) -> vec2<f32> {
    if (!spline_inside(y)) {
        return vec2<f32>(y, 0.0);
    }
    let i = spline_bin(y, true);
    let w = kxs[i + 1u] - kxs[i];
    let h = kys[i + 1u] - kys[i];
    let s = h / w;
    let d0 = kds[i];
    let d1 = kds[i + 1u];
    let dy = y - kys[i];
    let sum = d0 + d1 - 2.0 * s;
    let qa = h * (s - d0) + dy * sum;
    let qb = h * d0 - dy * sum;
    let qc = -s * dy;
    let disc = max(qb * qb - 4.0 * qa * qc, 0.0);
    let xi = clamp(2.0 * qc / (-qb - sqrt(disc)), 0.0, 1.0);
    let x = kxs[i] + xi * w;
    return vec2<f32>(x, spline_eval(i, x, false).y);
}

// Partials of the spline layer at raw offset o (knots already computed).
fn spline_partials(o: u32, x: f32) -> vec2<f32> {
    for (var j = 0u; j < P; j++) {
        f_raw[j] = 0.0;
        l_raw[j] = 0.0;
    }
    if (!spline_inside(x)) {
        return vec2<f32>(1.0, 0.0);
    }
    let i = spline_bin(x, false);
    let e = spline_eval(i, x, true);
    let two_b = 2.0 * SBOUND;
    let scale = 1.0 - 1e-3 * f32(SB);
    // positions depend on the widths (heights) before bin i, lengths on bin i
    var mean_fw = 0.0;
    var mean_lw = 0.0;
    var mean_fh = 0.0;
    var mean_lh = 0.0;
    for (var j = 0u; j < SB; j++) {
        let before = select(0.0, 1.0, j < i);
        let at = select(0.0, 1.0, j == i);
        mean_fw += (before * loc_f[0] + at * loc_f[1]) * two_b * kpw[j];
        mean_lw += (before * loc_l[0] + at * loc_l[1]) * two_b * kpw[j];
        mean_fh += (before * loc_f[2] + at * loc_f[3]) * two_b * kph[j];
        mean_lh += (before * loc_l[2] + at * loc_l[3]) * two_b * kph[j];
    }
    let wo = 2u * SB - 1u;
    for (var j = 0u; j < SB; j++) {
        let before = select(0.0, 1.0, j < i);
        let at = select(0.0, 1.0, j == i);
        f_raw[wo + j] = scale * kpw[j] * ((before * loc_f[0] + at * loc_f[1]) * two_b - mean_fw);
        l_raw[wo + j] = scale * kpw[j] * ((before * loc_l[0] + at * loc_l[1]) * two_b - mean_lw);
        f_raw[j] = scale * kph[j] * ((before * loc_f[2] + at * loc_f[3]) * two_b - mean_fh);
        l_raw[j] = scale * kph[j] * ((before * loc_l[2] + at * loc_l[3]) * two_b - mean_lh);
    }
    if (i >= 1u) {
        f_raw[SB + i - 1u] = loc_f[4] * kdd[i];
        l_raw[SB + i - 1u] = loc_l[4] * kdd[i];
    }
    if (i + 1u < SB) {
        f_raw[SB + i] = loc_f[5] * kdd[i + 1u];
        l_raw[SB + i] = loc_l[5] * kdd[i + 1u];
    }
    return e.zw;
}

// ---- one layer of the stack, from the thread's raw parameters

fn layer_forward(k: u32, x: f32) -> vec2<f32> {
    let o = k * P;
    if (FAMILY == 0u) {
        return cubic_rational_forward(cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]), x);
    } else if (FAMILY == 1u) {
        return sinh_forward(sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]), x);
    } else if (FAMILY == 3u) {
        return affine_forward(raw[o], raw[o + 1u], x);
    } else if (FAMILY == 4u) {
        spline_knots(o);
        return spline_forward(x);
    }
    return cubic_forward(cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]), x);
}

fn layer_inverse(k: u32, y: f32) -> vec2<f32> {
    let o = k * P;
    if (FAMILY == 0u) {
        return cubic_rational_inverse(cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]), y);
    } else if (FAMILY == 1u) {
        return sinh_inverse(sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]), y);
    } else if (FAMILY == 3u) {
        return affine_inverse(raw[o], raw[o + 1u], y);
    } else if (FAMILY == 4u) {
        spline_knots(o);
        return spline_inverse(y);
    }
    return cubic_inverse(cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]), y);
}

// f(x0 + d) - y0 with y0 = f(x0), without the cancellation of the plain
// difference when d is small against x0 (src/bijection/*.rs `diff`).
fn layer_diff(k: u32, x0: f32, y0: f32, d: f32) -> f32 {
    let o = k * P;
    if (FAMILY == 0u) {
        let b = cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]);
        let u = x0 - b.c;
        let w2 = u + d;
        return d + b.alpha * d * (1.0 - b.beta * u * w2) / ((1.0 + b.beta * w2 * w2) * (1.0 + b.beta * u * u));
    } else if (FAMILY == 1u) {
        let b = sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]);
        let a1 = (x0 - b.c) / b.s;
        let da = d / b.s;
        let a2 = a1 + da;
        let z1 = exp(b.mu) * (exp(b.nu) * sinh_f(a1) + b.beta);
        let z2 = exp(b.mu) * (exp(b.nu) * sinh_f(a2) + b.beta);
        if (abs(a1) < 20.0 && abs(a2) < 20.0 && abs(z1) < 1e15 && abs(z2) < 1e15) {
            let dz = exp(b.mu + b.nu) * 2.0 * cosh(a1 + 0.5 * da) * sinh_f(0.5 * da);
            let r1 = sqrt(1.0 + z1 * z1);
            let r2 = sqrt(1.0 + z2 * z2);
            var p = z2 * r1 - z1 * r2;
            if (z1 * z2 > 0.0) {
                p = dz * (z1 + z2) / (z2 * r1 + z1 * r2);
            }
            return b.s * asinh_robust(p);
        }
    } else if (FAMILY == 2u) {
        let b = cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]);
        let u = x0 - b.c;
        let v1 = y0 - b.c;
        let v2 = cubic_g_inv(b, cubic_g(b, u + d) + b.beta);
        let dw = d * (b.a + b.b * (3.0 * u * u + 3.0 * u * d + d * d));
        return dw / (b.a + b.b * (v1 * v1 + v1 * v2 + v2 * v2));
    } else if (FAMILY == 3u) {
        return exp(2.0 * tanh(raw[o] / 2.0)) * d;
    } else if (FAMILY == 4u) {
        spline_knots(o);
        let x1 = x0 + d;
        if (!spline_inside(x0) && !spline_inside(x1)) {
            return d;
        }
        let i = spline_bin(x0, false);
        if (spline_inside(x0) && spline_inside(x1) && i == spline_bin(x1, false)) {
            let w = kxs[i + 1u] - kxs[i];
            let h = kys[i + 1u] - kys[i];
            let s = h / w;
            let d0 = kds[i];
            let sigma = d0 + kds[i + 1u] - 2.0 * s;
            let xi1 = (x0 - kxs[i]) / w;
            let xi2 = (x1 - kxs[i]) / w;
            let den1 = s + sigma * xi1 * (1.0 - xi1);
            let den2 = s + sigma * xi2 * (1.0 - xi2);
            return h * s * (d / w) * ((s - d0) * (xi1 + xi2) + d0 + sigma * xi1 * xi2) / (den1 * den2);
        }
    }
    return layer_forward(k, x0 + d).x - y0;
}

// f^-1(y0 + e) - x0 with y0 = f(x0): the plain inverse, then Newton steps on
// layer_diff to recover what the sum y0 + e lost.
fn layer_inv_diff(k: u32, x0: f32, y0: f32, e: f32) -> f32 {
    var delta = layer_inverse(k, y0 + e).x - x0;
    for (var it = 0; it < 2; it++) {
        let residual = layer_diff(k, x0, y0, delta) - e;
        delta -= residual / exp(layer_forward(k, x0 + delta).y);
    }
    return delta;
}

// Whether value + small loses more than eight bits of small (src/flow/radial.rs).
fn needs_differences(value: f32, small: f32) -> bool {
    return abs(value) > 256.0 * abs(small);
}

// Partials at x with y = f(x): returns (f', d log f'/dx); raw derivatives of
// f and log f' go to f_raw and l_raw (as src/bijection/*.rs `partials`).
fn layer_partials(k: u32, x: f32, y: f32) -> vec2<f32> {
    let o = k * P;
    if (FAMILY == 0u) {
        let low = -1.0 + 1e-3;
        let high = 8.0 - 1e-3;
        let pr = -low / (high - low);
        let sa = sigmoid(raw[o] + log(pr / (1.0 - pr)));
        let alpha = low + (high - low) * sa;
        let dalpha = (high - low) * sa * (1.0 - sa);
        let beta = 0.1 + softplus(raw[o + 1u] + 1.0);
        let dbeta = sigmoid(raw[o + 1u] + 1.0);
        let u = x - raw[o + 2u];
        let u2 = u * u;
        let bu2 = beta * u2;
        let d = 1.0 + bu2;
        let d2 = d * d;
        let d3 = d2 * d;
        let nn = 1.0 - bu2;
        let fp = 1.0 + alpha * nn / d2;
        let three_m = 3.0 - bu2;
        let fpp = -2.0 * alpha * beta * u * three_m / d3;
        f_raw[0] = u / d * dalpha;
        f_raw[1] = -alpha * u2 * u / d2 * dbeta;
        f_raw[2] = 1.0 - fp;
        l_raw[0] = nn / d2 / fp * dalpha;
        l_raw[1] = -alpha * u2 * three_m / d3 / fp * dbeta;
        l_raw[2] = -fpp / fp;
        return vec2<f32>(fp, fpp / fp);
    } else if (FAMILY == 1u) {
        let b = sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]);
        let ds = sigmoid(raw[o]);
        let dmu = 1.0 / sqrt(1.0 + raw[o + 3u] * raw[o + 3u]);
        let dnu = 1.0 / sqrt(1.0 + raw[o + 4u] * raw[o + 4u]);
        let e = sinh_forward(b, x);
        let a = (x - b.c) / b.s;
        let big_a = (e.x - b.c) / b.s;
        let fp = exp(e.y);
        let th_a = tanh(a);
        let th_big = tanh(big_a);
        let eb = exp(-abs(big_a));
        let emu_over_r = exp(b.mu) * 2.0 * eb / (1.0 + eb * eb);
        let f_beta = b.s * emu_over_r;
        let f_mu = b.s * th_big;
        let f_nu = f_mu - b.beta * f_beta;
        let logd_x = (th_a - th_big * fp) / b.s;
        f_raw[0] = (big_a - a * fp) * ds;
        f_raw[1] = f_beta;
        f_raw[2] = 1.0 - fp;
        f_raw[3] = f_mu * dmu;
        f_raw[4] = f_nu * dnu;
        l_raw[0] = -a * logd_x * ds;
        l_raw[1] = -th_big * emu_over_r;
        l_raw[2] = -logd_x;
        l_raw[3] = (1.0 - th_big * th_big) * dmu;
        l_raw[4] = (1.0 - th_big * f_nu / b.s) * dnu;
        return vec2<f32>(fp, logd_x);
    } else if (FAMILY == 4u) {
        spline_knots(o);
        return spline_partials(o, x);
    } else if (FAMILY == 3u) {
        let th = tanh(raw[o] / 2.0);
        let scale = exp(2.0 * th);
        f_raw[0] = scale * x * (1.0 - th * th);
        f_raw[1] = 1.0;
        l_raw[0] = 1.0 - th * th;
        l_raw[1] = 0.0;
        return vec2<f32>(scale, 0.0);
    }
    let tha = tanh(raw[o] / 2.0);
    let thb = tanh(raw[o + 1u] / 2.0);
    let a = exp(2.0 * tha);
    let bb = exp(2.0 * thb);
    let da = a * (1.0 - tha * tha);
    let db = bb * (1.0 - thb * thb);
    let c = raw[o + 3u];
    let u = x - c;
    let v = y - c;
    let gu = a + 3.0 * bb * u * u;
    let gv = a + 3.0 * bb * v * v;
    let fp = gu / gv;
    let dd = u - v;
    let v_a = dd / gv;
    let v_b = dd * (u * u + u * v + v * v) / gv;
    let v_beta = 1.0 / gv;
    let six_b = 6.0 * bb;
    let logd_x = six_b * u / gu - six_b * v / gv * fp;
    f_raw[0] = v_a * da;
    f_raw[1] = v_b * db;
    f_raw[2] = v_beta;
    f_raw[3] = 1.0 - fp;
    l_raw[0] = (1.0 / gu - (1.0 + six_b * v * v_a) / gv) * da;
    l_raw[1] = (3.0 * u * u / gu - (3.0 * v * v + six_b * v * v_b) / gv) * db;
    l_raw[2] = -six_b * v * v_beta / gv;
    l_raw[3] = -logd_x;
    return vec2<f32>(fp, logd_x);
}

// Reverse-mode rules (src/bijection/mod.rs): x = f(z) and z = f^-1(x).
fn x_from_z_vjp(k: u32, z: f32, x: f32, x_bar: f32, ld_bar: f32) -> f32 {
    let p = layer_partials(k, z, x);
    for (var i = 0u; i < P; i++) {
        raw_bar[k * P + i] += x_bar * f_raw[i] + ld_bar * l_raw[i];
    }
    return x_bar * p.x + ld_bar * p.y;
}

fn z_from_x_vjp(k: u32, z: f32, x: f32, z_bar: f32, ld_bar: f32) -> f32 {
    let p = layer_partials(k, z, x);
    let g = z_bar - ld_bar * p.y;
    for (var i = 0u; i < P; i++) {
        raw_bar[k * P + i] -= g * f_raw[i] / p.x + ld_bar * l_raw[i];
    }
    return g / p.x;
}

// ---- the conditioner: raw parameters for direction u

fn body(j: u32) -> f32 {
    return params[2u * D + j];
}

fn condition(u: vec2<f32>) {
    if (ORDER == 0u) {
        for (var q = 0u; q < NRAW; q++) {
            raw[q] = body(q);
        }
        return;
    }
    let t = atan2(u.y, u.x) + PI;
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
        let t = atan2(u.y, u.x) + PI;
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

// ---- energy targets (src/target/energy.rs): (log p~(x), d/dx0, d/dx1), 2D

fn energy(x: vec2<f32>) -> vec3<f32> {
    let r = max(length(x), 1e-30);
    if (TARGET == 1u) {
        let a = abs(x.x);
        let sg = sgn(x.x);
        let k = 4.0 / 0.09;
        let v = -0.5 * pow((r - 2.0) / 0.2, 2.0) - 0.5 * pow((a - 2.0) / 0.3, 2.0) + softplus(-k * a);
        let dr = -(r - 2.0) / 0.04;
        let da = -(a - 2.0) / 0.09 - k * sigmoid(-k * a);
        return vec3<f32>(v, dr * x.x / r + da * sg, dr * x.y / r);
    }
    if (TARGET == 2u) {
        let sd = 2.0 / 3.0 * sin(PI / 8.0);
        var terms: array<f32, 8>;
        var m = -1e30;
        for (var i = 0u; i < 8u; i++) {
            let t = 2.0 * PI * f32(i) / 8.0;
            let d = x - vec2<f32>(2.0 * sin(t), 2.0 * cos(t));
            terms[i] = -0.5 * dot(d, d) / (sd * sd);
            m = max(m, terms[i]);
        }
        var s = 0.0;
        var g = vec2<f32>(0.0, 0.0);
        for (var i = 0u; i < 8u; i++) {
            let t = 2.0 * PI * f32(i) / 8.0;
            let d = x - vec2<f32>(2.0 * sin(t), 2.0 * cos(t));
            let e = exp(terms[i] - m);
            s += e;
            g -= e * d / (sd * sd);
        }
        let v = m + log(s) - log(2.0 * PI * sd * sd) - log(8.0);
        return vec3<f32>(v, g.x / s, g.y / s);
    }
    // ring mixture, 2 rings of radius 1 and 2, sd 1/8
    let sdr = 0.125;
    let t1 = -0.5 * pow((r - 1.0) / sdr, 2.0);
    let t2 = -0.5 * pow((r - 2.0) / sdr, 2.0);
    let m = max(t1, t2);
    let e1 = exp(t1 - m);
    let e2 = exp(t2 - m);
    let v = m + log(e1 + e2);
    let dr = -(e1 * (r - 1.0) + e2 * (r - 2.0)) / ((e1 + e2) * sdr * sdr);
    return vec3<f32>(v, dr * x.x / r, dr * x.y / r);
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
