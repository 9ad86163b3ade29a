// Coupling flows on the GPU, the per-sample parts (src/flow/coupling.rs): each
// layer's scalar stacks on the active coordinates, their reverse mode, and the
// loss. The conditioner's dense layers run in matmul.wgsl. One thread per
// sample; every array lives in `work` at offsets the Rust side lays out.

#import lib/stack.wgsl
#import lib/energy.wgsl

const D: u32 = {D}u;        // data dimension
const NOUT: u32 = {NOUT}u;  // conditioner outputs per sample (active coordinates x NRAW)
const LOG_2PI: f32 = 1.8378770664093453;

struct CoupleOp {
    n: u32,        // samples
    src: u32,      // the layer's input snapshot (n x D)
    dst: u32,      // its output snapshot (n x D)
    raw: u32,      // the conditioner's output (n x NOUT)
    first: u32,    // the first active coordinate; active ones are first, first + 2, ...
    n_active: u32,
    dir: u32,      // 0: z_from_x (density direction), 1: x_from_z (sampling direction)
    ld: u32,       // per-sample log det (n)
    bar: u32,      // adjoints of the current snapshot (n x D)
    raw_bar: u32,  // adjoint of the conditioner's output (n x NOUT)
    inv_n: f32,    // 1 / batch: the loss is a mean
    mode: u32,     // loss: 0 forward KL, 1 reverse KL, 2 log q, 3 x and log det
    init_ld: u32,  // 1: this layer starts the log det at 0
    loss: u32,     // per-sample loss terms (n)
    out: u32,      // display output: log q (n) or x and log det (n x (D + 1))
    z0: u32,       // the latent snapshot (reverse KL)
}

@group(0) @binding(0) var<uniform> op: CoupleOp;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
// the loss, then the gradient
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

fn load_raw(i: u32, a: u32) {
    let base = op.raw + i * NOUT + a * NRAW;
    for (var q = 0u; q < NRAW; q++) {
        raw[q] = work[base + q];
    }
}

@compute @workgroup_size(64)
fn couple_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= op.n) {
        return;
    }
    for (var j = 0u; j < D; j++) {
        work[op.dst + i * D + j] = work[op.src + i * D + j];
    }
    var ld = 0.0;
    if (op.init_ld == 0u) {
        ld = work[op.ld + i];
    }
    for (var a = 0u; a < op.n_active; a++) {
        let idx = op.first + 2u * a;
        load_raw(i, a);
        let s = stack_apply(work[op.src + i * D + idx], op.dir);
        work[op.dst + i * D + idx] = s.x;
        ld += s.y;
    }
    work[op.ld + i] = ld;
}

// Backward through one layer's stacks: the adjoints of its output (bar) become
// those of its input; the stacks' raw adjoints go to raw_bar.
@compute @workgroup_size(64)
fn couple_back_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= op.n) {
        return;
    }
    let ld_bar = -op.inv_n;
    for (var a = 0u; a < op.n_active; a++) {
        let idx = op.first + 2u * a;
        load_raw(i, a);
        let top = stack_apply(work[op.src + i * D + idx], op.dir).x;
        for (var q = 0u; q < NRAW; q++) {
            raw_bar[q] = 0.0;
        }
        var bar = work[op.bar + i * D + idx];
        if (op.dir == 0u) {
            // trace[k] is layer k's z side; the chain ran from top (the x side) down
            for (var k = 0u; k < K; k++) {
                var x = work[op.src + i * D + idx];
                if (k + 1u < K) {
                    x = trace[k + 1u];
                }
                bar = z_from_x_vjp(k, trace[k], x, bar, ld_bar);
            }
        } else {
            for (var kk = 0u; kk < K; kk++) {
                let k = K - 1u - kk;
                var x = top;
                if (k + 1u < K) {
                    x = trace[k + 1u];
                }
                bar = x_from_z_vjp(k, trace[k], x, bar, ld_bar);
            }
        }
        work[op.bar + i * D + idx] = bar;
        let base = op.raw_bar + i * NOUT + a * NRAW;
        for (var q = 0u; q < NRAW; q++) {
            work[base + q] = raw_bar[q];
        }
    }
}

// The loss term and the adjoints of the final snapshot (`src`), or the display
// outputs.
@compute @workgroup_size(64)
fn loss_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= op.n) {
        return;
    }
    let ld = work[op.ld + i];
    var sq = 0.0;
    for (var j = 0u; j < D; j++) {
        let v = work[op.src + i * D + j];
        sq += v * v;
    }
    let log_normal = -0.5 * sq - 0.5 * f32(D) * LOG_2PI;
    if (op.mode == 0u) {
        // -log q(x) = -log N(z) - log det
        work[op.loss + i] = -(log_normal + ld) * op.inv_n;
        for (var j = 0u; j < D; j++) {
            work[op.bar + i * D + j] = work[op.src + i * D + j] * op.inv_n;
        }
    } else if (op.mode == 1u) {
        // log N(z) - log det - log p~(x), with x = x_from_z(z)
        var zsq = 0.0;
        for (var j = 0u; j < D; j++) {
            let v = work[op.z0 + i * D + j];
            zsq += v * v;
        }
        let x = vec2<f32>(work[op.src + i * D], work[op.src + i * D + min(1u, D - 1u)]);
        let e = energy(x);
        work[op.loss + i] = (-0.5 * zsq - 0.5 * f32(D) * LOG_2PI - ld - e.x) * op.inv_n;
        work[op.bar + i * D] = -e.y * op.inv_n;
        work[op.bar + i * D + 1u] = -e.z * op.inv_n;
    } else if (op.mode == 2u) {
        work[op.out + i] = log_normal + ld;
    } else {
        for (var j = 0u; j < D; j++) {
            work[op.out + i * (D + 1u) + j] = work[op.src + i * D + j];
        }
        work[op.out + i * (D + 1u) + D] = ld;
    }
}
