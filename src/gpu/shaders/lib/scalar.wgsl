// The analytic scalar bijections in float32, mirroring src/bijection/ (docs/mathematics.md,
// section 2, with its float32-stable forms). Raw parameters are mapped to constrained
// ones here exactly as on the CPU.

const LN_2: f32 = 0.6931471805599453;

fn sgn(x: f32) -> f32 {
    return select(1.0, -1.0, x < 0.0);
}

fn softplus(t: f32) -> f32 {
    if (t > 20.0) {
        return t + log(1.0 + exp(-t));
    }
    return log(1.0 + exp(t));
}

fn sigmoid(t: f32) -> f32 {
    if (t >= 0.0) {
        return 1.0 / (1.0 + exp(-t));
    }
    let e = exp(t);
    return e / (1.0 + e);
}

// asinh without overflow for large |x| or cancellation for small |x| (docs/mathematics.md, section 2.2).
fn asinh_robust(x: f32) -> f32 {
    let a = abs(x);
    var r: f32;
    if (a < 1e-3) {
        r = a - a * a * a / 6.0;
    } else if (a > 1e4) {
        r = log(a) + LN_2 + 0.25 / (a * a);
    } else {
        r = log(a + sqrt(a * a + 1.0));
    }
    return sgn(x) * r;
}

fn sinh_f(x: f32) -> f32 {
    if (abs(x) < 1e-3) {
        return x + x * x * x / 6.0;
    }
    let e = exp(x);
    return 0.5 * (e - 1.0 / e);
}

fn log_cosh(a: f32) -> f32 {
    let m = abs(a);
    return m + log(1.0 + exp(-2.0 * m)) - LN_2;
}

// Cube root: a bit-level guess and two Halley steps (WGSL has no cbrt).
fn cbrt_f(x: f32) -> f32 {
    var a = abs(x);
    if (a == 0.0) {
        return 0.0;
    }
    var unscale = 1.0;
    if (a < 1e-30) {
        a = a * 1.2379400392853803e27; // 2^90
        unscale = 9.313225746154785e-10; // 2^-30
    } else if (a > 1e37) {
        a = a * 8.077935669463161e-28; // 2^-90
        unscale = 1073741824.0; // 2^30
    }
    var y = bitcast<f32>(bitcast<u32>(a) / 3u + 709921077u);
    for (var i = 0; i < 2; i++) {
        let y3 = y * y * y;
        y = y * (y3 + 2.0 * a) / (2.0 * y3 + a);
    }
    return sgn(x) * y * unscale;
}

// ---- cubic rational: f(x) = x + alpha u / (1 + beta u^2), raw (alpha, beta, c)

struct CubicRational {
    alpha: f32,
    beta: f32,
    c: f32,
}

fn cubic_rational_from_raw(r0: f32, r1: f32, r2: f32) -> CubicRational {
    let low = -1.0 + 1e-3;
    let high = 8.0 - 1e-3;
    let p = -low / (high - low);
    let offset = log(p / (1.0 - p));
    return CubicRational(low + (high - low) * sigmoid(r0 + offset), 0.1 + softplus(r1 + 1.0), r2);
}

// (f(x), log f'(x))
fn cubic_rational_forward(b: CubicRational, x: f32) -> vec2<f32> {
    let u = x - b.c;
    let bu2 = b.beta * u * u;
    let d = 1.0 + bu2;
    let fp = 1.0 + b.alpha * (1.0 - bu2) / (d * d);
    return vec2<f32>(x + b.alpha * u / d, log(fp));
}

// f^-1(y): the expanded-discriminant Cardano form for p < 0, the
// hyperbolic form for p >= 0 (where v - p/(3v) would cancel near y = 0).
fn cubic_rational_solve(b: CubicRational, y: f32) -> f32 {
    let alpha = b.alpha;
    let beta = b.beta;
    let k = 1.0 + alpha;
    let p = k / beta - y * y / 3.0;
    let q = y * (alpha - 2.0) / (3.0 * beta) - 2.0 * y * y * y / 27.0;
    var t: f32;
    if (p > 0.0) {
        let s = sqrt(p / 3.0);
        let arg = q / (2.0 * p * s) * 3.0;
        t = -2.0 * s * sinh_f(asinh_robust(arg) / 3.0);
    } else if (p == 0.0) {
        t = cbrt_f(-q);
    } else {
        let c1 = alpha * alpha + 20.0 * alpha - 8.0;
        let by2 = beta * y * y;
        var num: f32;
        if (alpha >= 0.0) {
            let m = by2 - c1 / 8.0;
            let e = 8.0 - alpha;
            num = 4.0 * m * m + alpha * e * e * e / 16.0;
        } else {
            num = 4.0 * by2 * by2 - c1 * by2 + 4.0 * k * k * k;
        }
        let big_q = max(num / (108.0 * beta * beta * beta), 0.0);
        let w = -q / 2.0 - sgn(q) * sqrt(big_q);
        let v = cbrt_f(w);
        if (v == 0.0) {
            t = 0.0;
        } else {
            t = v - p / (3.0 * v);
        }
    }
    return y / 3.0 + t;
}

// (f^-1(y), log f'(f^-1(y)))
fn cubic_rational_inverse(b: CubicRational, y: f32) -> vec2<f32> {
    let x = cubic_rational_solve(b, y - b.c) + b.c;
    return vec2<f32>(x, cubic_rational_forward(b, x).y);
}

// ---- sinh conjugation: f(x) = c + s asinh(e^mu (e^nu sinh(u/s) + beta)),
// raw (s, beta, c, mu, nu)

struct Sinh {
    s: f32,
    beta: f32,
    c: f32,
    mu: f32,
    nu: f32,
}

fn sinh_from_raw(r0: f32, r1: f32, r2: f32, r3: f32, r4: f32) -> Sinh {
    return Sinh(softplus(r0) + 0.1, r1, r2, asinh_robust(r3), asinh_robust(r4));
}

// asinh(sign e^log_z) without forming a huge z.
fn asinh_from_log(sign: f32, log_z: f32) -> f32 {
    if (log_z > 10.0) {
        return sign * (log_z + LN_2);
    }
    return asinh_robust(sign * exp(log_z));
}

// (f(x), log f'(x)) for parameters (beta, mu, nu); the inverse swaps them.
fn sinh_eval(b: Sinh, x: f32, beta: f32, mu: f32, nu: f32) -> vec2<f32> {
    let a = (x - b.c) / b.s;
    if (abs(a) < 20.0) {
        let inner = exp(nu) * sinh_f(a) + beta;
        let z = exp(mu) * inner;
        var big_a: f32;
        if (abs(z) < 1e30) {
            big_a = asinh_robust(z);
        } else {
            big_a = asinh_from_log(sgn(inner), mu + log(abs(inner)));
        }
        return vec2<f32>(b.c + b.s * big_a, mu + nu + log_cosh(a) - log_cosh(big_a));
    }
    let sg = sgn(a);
    let q = 1.0 + 2.0 * sg * beta * exp(-nu - abs(a));
    let log_z = mu + nu + abs(a) - LN_2 + log(abs(q));
    let big_a = asinh_from_log(sg * sgn(q), log_z);
    var logd: f32;
    if (log_z > 10.0) {
        // log cosh(a) - log cosh(A) with the large terms cancelled exactly
        logd = -log(abs(q)) + log(1.0 + exp(-2.0 * abs(a))) - log(1.0 + exp(-2.0 * abs(big_a)));
    } else {
        logd = mu + nu + log_cosh(a) - log_cosh(big_a);
    }
    return vec2<f32>(b.c + b.s * big_a, logd);
}

fn sinh_forward(b: Sinh, x: f32) -> vec2<f32> {
    return sinh_eval(b, x, b.beta, b.mu, b.nu);
}

fn sinh_inverse(b: Sinh, y: f32) -> vec2<f32> {
    let r = sinh_eval(b, y, -b.beta, -b.nu, -b.mu);
    return vec2<f32>(r.x, -r.y);
}

// ---- cubic polynomial conjugation: f(x) = c + g^-1(g(u) + beta),
// g(v) = a v + b v^3, raw (a, b, beta, c)

struct Cubic {
    a: f32,
    b: f32,
    beta: f32,
    c: f32,
    inv_scale: f32,
    inv_arg: f32,
}

fn cubic_from_raw(r0: f32, r1: f32, r2: f32, r3: f32) -> Cubic {
    let sa = exp(tanh(r0 / 2.0));
    let sb = exp(tanh(r1 / 2.0));
    let a = sa * sa;
    let b = sb * sb;
    let sqrt3 = 1.7320508075688772;
    return Cubic(a, b, r2, r3, 2.0 * sa / (sqrt3 * sb), 1.5 * sqrt3 * sb / (a * sa));
}

fn cubic_g(b: Cubic, v: f32) -> f32 {
    return v * (b.a + b.b * v * v);
}

fn cubic_g_prime(b: Cubic, v: f32) -> f32 {
    return b.a + 3.0 * b.b * v * v;
}

// g^-1(w) = s sinh(asinh(k w)/3) = s h, where 4h^3 + 3h = t: with
// q^3 = t + sqrt(t^2 + 1) = 1 + P, h = (q - 1)(q + 1)/(2q), q - 1 = P/(q^2 + q + 1).
fn cubic_g_inv(b: Cubic, w: f32) -> f32 {
    let t = abs(b.inv_arg * w);
    var h: f32;
    if (t < 1e15) {
        let p = t + t * t / (sqrt(t * t + 1.0) + 1.0);
        let q = cbrt_f(1.0 + p);
        let qm1 = p / (q * q + q + 1.0);
        h = qm1 * (q + 1.0) / (2.0 * q);
    } else {
        let q = cbrt_f(2.0 * t);
        h = 0.5 * (q - 1.0 / q);
    }
    return b.inv_scale * sgn(w) * h;
}

fn cubic_forward(b: Cubic, x: f32) -> vec2<f32> {
    let u = x - b.c;
    let v = cubic_g_inv(b, cubic_g(b, u) + b.beta);
    return vec2<f32>(b.c + v, log(cubic_g_prime(b, u) / cubic_g_prime(b, v)));
}

fn cubic_inverse(b: Cubic, y: f32) -> vec2<f32> {
    let v = y - b.c;
    let u = cubic_g_inv(b, cubic_g(b, v) - b.beta);
    return vec2<f32>(b.c + u, log(cubic_g_prime(b, u) / cubic_g_prime(b, v)));
}

// ---- affine baseline: f(x) = e^s x + t, s = 2 tanh(raw_s / 2), raw (s, t)

fn affine_forward(r0: f32, r1: f32, x: f32) -> vec2<f32> {
    let s = 2.0 * tanh(r0 / 2.0);
    return vec2<f32>(exp(s) * x + r1, s);
}

fn affine_inverse(r0: f32, r1: f32, y: f32) -> vec2<f32> {
    let s = 2.0 * tanh(r0 / 2.0);
    return vec2<f32>((y - r1) * exp(-s), s);
}
