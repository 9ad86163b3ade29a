// Energy targets (src/target/energy.rs), 2D: TARGET 1 two-moons, 2 circular
// GMM, 3 ring mixture (two rings). The Rust side fills in TARGET.

#import lib/scalar.wgsl

const TARGET: u32 = {TARGET}u;
const ENERGY_PI: f32 = 3.141592653589793;

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
        let sd = 2.0 / 3.0 * sin(ENERGY_PI / 8.0);
        var terms: array<f32, 8>;
        var m = -1e30;
        for (var i = 0u; i < 8u; i++) {
            let t = 2.0 * ENERGY_PI * f32(i) / 8.0;
            let d = x - vec2<f32>(2.0 * sin(t), 2.0 * cos(t));
            terms[i] = -0.5 * dot(d, d) / (sd * sd);
            m = max(m, terms[i]);
        }
        var s = 0.0;
        var g = vec2<f32>(0.0, 0.0);
        for (var i = 0u; i < 8u; i++) {
            let t = 2.0 * ENERGY_PI * f32(i) / 8.0;
            let d = x - vec2<f32>(2.0 * sin(t), 2.0 * cos(t));
            let e = exp(terms[i] - m);
            s += e;
            g -= e * d / (sd * sd);
        }
        let v = m + log(s) - log(2.0 * ENERGY_PI * sd * sd) - log(8.0);
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
