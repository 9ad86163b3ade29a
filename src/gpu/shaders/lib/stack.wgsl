// One stack of K scalar layers, from the thread's raw parameters (`raw`,
// layer-major), mirroring src/bijection/. The Rust side fills in the constants
// and the layout functions; kernels that use it define how `raw` is filled.

#import lib/scalar.wgsl

const K: u32 = {K}u;          // layers in the stack
const NRAW: u32 = {NRAW}u;    // raw parameters of the whole stack
const PF: u32 = {PF}u;        // the most raw parameters of one layer (at least 5)
const SB: u32 = {SPLINE_BINS}u;  // spline bins (family 4)
const SBOUND: f32 = {SPLINE_BOUND};

// family_of(k): 0 cubic rational, 1 sinh, 2 cubic, 3 affine, 4 spline;
// offset_of(k): where layer k's raw parameters start. Constant-folded for a
// stack of one family.
{LAYOUT}

// Raw parameters of one layer of `family`.
fn width_of(family: u32) -> u32 {
    switch family {
        case 0u: { return 3u; }
        case 1u: { return 5u; }
        case 2u: { return 4u; }
        case 3u: { return 2u; }
        default: { return 3u * SB - 1u; }
    }
}

var<private> raw: array<f32, NRAW>;
var<private> raw_bar: array<f32, NRAW>;
var<private> trace: array<f32, K>;
// sized for every family's branch (naga rejects constant indices out of range)
var<private> f_raw: array<f32, PF>;
var<private> l_raw: array<f32, PF>;

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
    for (var j = 0u; j < PF; j++) {
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
    let o = offset_of(k);
    let family = family_of(k);
    if (family == 0u) {
        return cubic_rational_forward(cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]), x);
    } else if (family == 1u) {
        return sinh_forward(sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]), x);
    } else if (family == 3u) {
        return affine_forward(raw[o], raw[o + 1u], x);
    } else if (family == 4u) {
        spline_knots(o);
        return spline_forward(x);
    }
    return cubic_forward(cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]), x);
}

fn layer_inverse(k: u32, y: f32) -> vec2<f32> {
    let o = offset_of(k);
    let family = family_of(k);
    if (family == 0u) {
        return cubic_rational_inverse(cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]), y);
    } else if (family == 1u) {
        return sinh_inverse(sinh_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u], raw[o + 4u]), y);
    } else if (family == 3u) {
        return affine_inverse(raw[o], raw[o + 1u], y);
    } else if (family == 4u) {
        spline_knots(o);
        return spline_inverse(y);
    }
    return cubic_inverse(cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]), y);
}

// f(x0 + d) - y0 with y0 = f(x0), without the cancellation of the plain
// difference when d is small against x0 (src/bijection/*.rs `diff`).
fn layer_diff(k: u32, x0: f32, y0: f32, d: f32) -> f32 {
    let o = offset_of(k);
    let family = family_of(k);
    if (family == 0u) {
        let b = cubic_rational_from_raw(raw[o], raw[o + 1u], raw[o + 2u]);
        let u = x0 - b.c;
        let w2 = u + d;
        return d + b.alpha * d * (1.0 - b.beta * u * w2) / ((1.0 + b.beta * w2 * w2) * (1.0 + b.beta * u * u));
    } else if (family == 1u) {
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
    } else if (family == 2u) {
        let b = cubic_from_raw(raw[o], raw[o + 1u], raw[o + 2u], raw[o + 3u]);
        let u = x0 - b.c;
        let v1 = y0 - b.c;
        let v2 = cubic_g_inv(b, cubic_g(b, u + d) + b.beta);
        let dw = d * (b.a + b.b * (3.0 * u * u + 3.0 * u * d + d * d));
        return dw / (b.a + b.b * (v1 * v1 + v1 * v2 + v2 * v2));
    } else if (family == 3u) {
        return exp(2.0 * tanh(raw[o] / 2.0)) * d;
    } else if (family == 4u) {
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
    let o = offset_of(k);
    let family = family_of(k);
    if (family == 0u) {
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
    } else if (family == 1u) {
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
    } else if (family == 4u) {
        spline_knots(o);
        return spline_partials(o, x);
    } else if (family == 3u) {
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
    let o = offset_of(k);
    for (var i = 0u; i < width_of(family_of(k)); i++) {
        raw_bar[o + i] += x_bar * f_raw[i] + ld_bar * l_raw[i];
    }
    return x_bar * p.x + ld_bar * p.y;
}

fn z_from_x_vjp(k: u32, z: f32, x: f32, z_bar: f32, ld_bar: f32) -> f32 {
    let p = layer_partials(k, z, x);
    let g = z_bar - ld_bar * p.y;
    let o = offset_of(k);
    for (var i = 0u; i < width_of(family_of(k)); i++) {
        raw_bar[o + i] -= g * f_raw[i] / p.x + ld_bar * l_raw[i];
    }
    return g / p.x;
}

// The whole stack in direction `dir` (0: z_from_x, the layers' inverses from
// the top; 1: x_from_z), recording each layer's input in trace; returns
// (output, log det of this direction). Shared by the coupling and lattice
// kernels.
fn stack_apply(v: f32, dir: u32) -> vec2<f32> {
    var y = v;
    var logd = 0.0;
    if (dir == 0u) {
        for (var kk = 0u; kk < K; kk++) {
            let k = K - 1u - kk;
            let s = layer_inverse(k, y);
            trace[k] = s.x;
            y = s.x;
            logd -= s.y;
        }
    } else {
        for (var k = 0u; k < K; k++) {
            trace[k] = y;
            let s = layer_forward(k, y);
            y = s.x;
            logd += s.y;
        }
    }
    return vec2<f32>(y, logd);
}
