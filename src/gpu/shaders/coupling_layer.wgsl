// Coupling flows on the GPU (src/flow/coupling.rs), one dispatch per layer and
// direction. A workgroup takes TILE samples through a layer's whole conditioner
// (the ResNet MLP of src/flow/nn/mlp.rs) and then its scalar stacks, stage
// after stage; the stages pass their arrays through `work`, and a storage
// barrier separates them. Samples are independent of each other until the
// weight gradients, which sum over the batch: they are a dispatch of their own
// (weight_grad_main), after each layer's backward pass. A training step is so
// 3 dispatches a layer plus the loss, the batch sum and Adam, where it was a
// matrix product a dispatch before (143 for 8 layers of depth 2, now 27).
//
// The conditioner of a layer, per sample (x: its passive coordinates):
//   h_0 = [x | 1] W_0;  h_k = h_{k-1} + [gelu(h_{k-1}) | 1] W_k  (k = 1..DEPTH);
//   raw = [h_DEPTH | 1] W_out
// with every [kernel; bias] read as one (rows + 1) x columns matrix, as
// src/flow/nn/mlp.rs lays them out.

#import lib/stack.wgsl
#import lib/gelu.wgsl
#import lib/energy.wgsl

const D: u32 = {D}u;          // data dimension
const NOUT: u32 = {NOUT}u;    // the row stride of raw and raw_bar (the widest layer's outputs)
const W: u32 = {W}u;          // conditioner width
const DEPTH: u32 = {DEPTH}u;  // residual blocks
const TILE: u32 = {TILE}u;    // samples a workgroup
const THREADS: u32 = 64u;
const LOG_2PI: f32 = 1.8378770664093453;

struct LayerOp {
    n: u32,         // samples
    src: u32,       // the layer's input snapshot (n x D)
    dst: u32,       // its output snapshot (n x D)
    ld: u32,        // per-sample log det (n)
    bar: u32,       // adjoints of the current snapshot (n x D)
    raw: u32,       // the conditioner's output (n x NOUT)
    raw_bar: u32,   // its adjoint (n x NOUT)
    first_active: u32,    // the active coordinates are first_active, first_active + 2, ...
    n_active: u32,
    passive: u32,   // the first passive coordinate, likewise
    n_passive: u32,
    dir: u32,       // 0: z_from_x (density direction), 1: x_from_z (sampling direction)
    init_ld: u32,   // 1: this layer starts the log det at 0
    inv_n: f32,     // 1 / batch: the loss is a mean
    params: u32,    // the layer's first parameter (in grad: 1 + params, after the loss)
    hidden: u32,    // h_0 .. h_DEPTH (n x W each)
    acts: u32,      // gelu(h_0) .. gelu(h_{DEPTH-1})
    h_bar: u32,     // the adjoints of h_0 .. h_DEPTH
    mode: u32,      // loss_main: 0 forward KL, 1 reverse KL, 2 log q, 3 x and log det
    loss: u32,      // per-sample loss terms (n)
    out: u32,       // display output: log q (n) or x and log det (n x (D + 1))
    z0: u32,        // the latent snapshot (reverse KL)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> op: LayerOp;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
// the loss, then the gradient
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

// Level k of the conditioner (0: input, 1..DEPTH: blocks, DEPTH + 1: output):
// where its (rows + 1) x cols matrix starts in the layer's parameters.
fn level_start(k: u32) -> u32 {
    if (k == 0u) {
        return op.params;
    }
    return op.params + (op.n_passive + 1u) * W + (k - 1u) * (W + 1u) * W;
}

fn level_rows(k: u32) -> u32 {
    if (k == 0u) {
        return op.n_passive;
    }
    return W;
}

fn level_cols(k: u32) -> u32 {
    if (k <= DEPTH) {
        return W;
    }
    return op.n_active * NRAW;
}

fn hidden_at(k: u32, i: u32) -> u32 {
    return op.hidden + (k * op.n + i) * W;
}

fn act_at(k: u32, i: u32) -> u32 {
    return op.acts + (k * op.n + i) * W;
}

fn h_bar_at(k: u32, i: u32) -> u32 {
    return op.h_bar + (k * op.n + i) * W;
}

// The conditioner's input: sample i's r-th passive coordinate.
fn passive_at(i: u32, r: u32) -> f32 {
    return work[op.src + i * D + op.passive + 2u * r];
}

fn load_raw(i: u32, a: u32) {
    let base = op.raw + i * NOUT + a * NRAW;
    for (var q = 0u; q < NRAW; q++) {
        raw[q] = work[base + q];
    }
}

// The conditioner forward for the tile from sample `base`: hidden states,
// their activations and raw, into work.
fn conditioner_forward(base: u32, lid: u32) {
    let start = level_start(0u);
    for (var e = lid; e < TILE * W; e += THREADS) {
        let i = base + e / W;
        let j = e % W;
        if (i < op.n) {
            var acc = params[start + op.n_passive * W + j];
            for (var r = 0u; r < op.n_passive; r++) {
                acc += passive_at(i, r) * params[start + r * W + j];
            }
            work[hidden_at(0u, i) + j] = acc;
            if (DEPTH > 0u) {
                work[act_at(0u, i) + j] = gelu(acc);
            }
        }
    }
    storageBarrier();
    for (var k = 1u; k <= DEPTH; k++) {
        let kernel = level_start(k);
        for (var e = lid; e < TILE * W; e += THREADS) {
            let i = base + e / W;
            let j = e % W;
            if (i < op.n) {
                let a = act_at(k - 1u, i);
                var acc = work[hidden_at(k - 1u, i) + j] + params[kernel + W * W + j];
                for (var q = 0u; q < W; q++) {
                    acc += work[a + q] * params[kernel + q * W + j];
                }
                work[hidden_at(k, i) + j] = acc;
                if (k < DEPTH) {
                    work[act_at(k, i) + j] = gelu(acc);
                }
            }
        }
        storageBarrier();
    }
    let kernel = level_start(DEPTH + 1u);
    let cols = level_cols(DEPTH + 1u);
    for (var e = lid; e < TILE * cols; e += THREADS) {
        let i = base + e / cols;
        let c = e % cols;
        if (i < op.n) {
            let h = hidden_at(DEPTH, i);
            var acc = params[kernel + W * cols + c];
            for (var q = 0u; q < W; q++) {
                acc += work[h + q] * params[kernel + q * cols + c];
            }
            work[op.raw + i * NOUT + c] = acc;
        }
    }
    storageBarrier();
}

// One layer forward: the conditioner, then the stacks on the active
// coordinates (dst and the log det).
@compute @workgroup_size(64)
fn layer_forward_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let base = (wg.x + wg.y * groups.x) * TILE;
    conditioner_forward(base, lid.x);
    let i = base + lid.x;
    if (lid.x >= TILE || i >= op.n) {
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
        let idx = op.first_active + 2u * a;
        load_raw(i, a);
        let s = stack_apply(work[op.src + i * D + idx], op.dir);
        work[op.dst + i * D + idx] = s.x;
        ld += s.y;
    }
    work[op.ld + i] = ld;
}

// Backward through the stacks of sample i: the adjoints of the layer's output
// (bar, in place) become those of its input; the raw adjoints go to raw_bar.
fn stacks_backward(i: u32) {
    let ld_bar = -op.inv_n;
    for (var a = 0u; a < op.n_active; a++) {
        let idx = op.first_active + 2u * a;
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

// One layer backward for a tile (the adjoints of its output snapshot in bar):
// the conditioner again (only layer inputs are kept between the passes), the
// stacks' reverse mode, and the conditioner's input adjoints level by level
// (h_bar, kept for weight_grad_main) down to the passive coordinates' adjoints,
// added to bar.
@compute @workgroup_size(64)
fn layer_backward_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let base = (wg.x + wg.y * groups.x) * TILE;
    conditioner_forward(base, lid.x);
    if (lid.x < TILE && base + lid.x < op.n) {
        stacks_backward(base + lid.x);
    }
    storageBarrier();
    // h_bar_DEPTH = raw_bar W_out^T (no activation before the output level)
    let out = level_start(DEPTH + 1u);
    let cols = level_cols(DEPTH + 1u);
    for (var e = lid.x; e < TILE * W; e += THREADS) {
        let i = base + e / W;
        let q = e % W;
        if (i < op.n) {
            var acc = 0.0;
            for (var c = 0u; c < cols; c++) {
                acc += work[op.raw_bar + i * NOUT + c] * params[out + q * cols + c];
            }
            work[h_bar_at(DEPTH, i) + q] = acc;
        }
    }
    storageBarrier();
    // residual blocks: h_bar_{k-1} = h_bar_k + (h_bar_k W_k^T) gelu'(h_{k-1})
    for (var kk = 0u; kk < DEPTH; kk++) {
        let k = DEPTH - kk;
        let kernel = level_start(k);
        for (var e = lid.x; e < TILE * W; e += THREADS) {
            let i = base + e / W;
            let q = e % W;
            if (i < op.n) {
                let hb = h_bar_at(k, i);
                var acc = 0.0;
                for (var j = 0u; j < W; j++) {
                    acc += work[hb + j] * params[kernel + q * W + j];
                }
                let slope = gelu_prime(work[hidden_at(k - 1u, i) + q]);
                work[h_bar_at(k - 1u, i) + q] = work[hb + q] + acc * slope;
            }
        }
        storageBarrier();
    }
    // the passive coordinates: bar += h_bar_0 W_0^T
    let first = level_start(0u);
    for (var e = lid.x; e < TILE * op.n_passive; e += THREADS) {
        let i = base + e / op.n_passive;
        let r = e % op.n_passive;
        if (i < op.n) {
            let hb = h_bar_at(0u, i);
            var acc = 0.0;
            for (var j = 0u; j < W; j++) {
                acc += work[hb + j] * params[first + r * W + j];
            }
            let at = op.bar + i * D + op.passive + 2u * r;
            work[at] += acc;
        }
    }
}

// The layer's parameter gradient after its backward pass, one thread an entry
// (numbered as in params): a sum over the batch of the level's input times
// its output adjoint, a bias entry's input being 1.
@compute @workgroup_size(64)
fn weight_grad_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    var e = (wg.x + wg.y * groups.x) * THREADS + lid.x;
    let entry = e;
    var k = 0u;
    loop {
        let size = (level_rows(k) + 1u) * level_cols(k);
        if (e < size) {
            break;
        }
        e -= size;
        k += 1u;
        if (k > DEPTH + 1u) {
            return;
        }
    }
    let cols = level_cols(k);
    let q = e / cols;
    let j = e % cols;
    let bias = q == level_rows(k);
    var s = 0.0;
    for (var i = 0u; i < op.n; i++) {
        var a = 1.0;
        if (!bias) {
            if (k == 0u) {
                a = passive_at(i, q);
            } else if (k <= DEPTH) {
                a = work[act_at(k - 1u, i) + q];
            } else {
                a = work[hidden_at(DEPTH, i) + q];
            }
        }
        var b = 0.0;
        if (k <= DEPTH) {
            b = work[h_bar_at(k, i) + j];
        } else {
            b = work[op.raw_bar + i * NOUT + j];
        }
        s += a * b;
    }
    grad[1u + op.params + entry] = s;
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
