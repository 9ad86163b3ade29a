// Lattice coupling flows on the GPU (src/flow/lattice.rs), one dispatch per
// layer and direction. The conditioner's periodic 3 x 3 convolutions mix
// neighbouring sites, so a field is never split: a workgroup takes one sample
// (both copies of it in the Z2 design) through a layer's whole conditioner and
// then the scalar stacks of its active sites, stage after stage, passing the
// stages' arrays through `work` with a storage barrier between them. Fields are
// independent of each other until the weight gradients, which sum over the
// batch: they are a dispatch of their own (weight_grad_main) after each
// layer's backward pass. A training step is so 3 dispatches a layer plus the
// loss, the batch sum and Adam (27 for 8 layers, where one dispatch a
// convolution, activation and site pass made 150).
//
// Arrays of the conditioner are matrices with one row per (copy, sample,
// site), row r = (copy n + i) V + s with site s = y L + x, and one column per
// channel. The conditioner (src/flow/nn/conv.rs, residual GELU design):
//   h_0 = conv_0(masked field);  h_k = h_{k-1} + conv_k(gelu(h_{k-1}))
//   (k = 1..DEPTH);  out = conv_out(h_DEPTH)
// Each conv_k's kernel sits in params as conv.rs lays it out: rows (tap,
// input channel) with taps (dy, dx) row-major over {-1, 0, 1}^2, then the
// bias. Its transpose gathers instead of scattering: tap t of site s reads
// site s + offset(t), so the adjoint at site s reads s - offset(t).
//
// The Z2-equivariant design (COPIES = 2) runs the conditioner on the field and
// on its negation; raw value q takes the odd part (N(+) - N(-)) / 2 where ODD
// marks it, the even part otherwise. Layer sites with (x + y + parity) odd are
// active.

#import lib/stack.wgsl
#import lib/gelu.wgsl

const COPIES: u32 = {COPIES}u;
const W: u32 = {W}u;          // conditioner channels
const DEPTH: u32 = {DEPTH}u;  // residual blocks
const M2: f32 = {M2};
const LAMBDA: f32 = {LAMBDA};
const THREADS: u32 = 128u;
const REDUCE: u32 = 256u;     // weight_grad_main's workgroup
const TAPS: u32 = 9u;
const LOG_2PI: f32 = 1.8378770664093453;

// 1 where raw value q of the stack is odd under phi -> -phi (Z2 only)
var<private> odd: array<u32, NRAW> = array<u32, NRAW>({ODD});

struct LatticeOp {
    n: u32,        // samples
    size: u32,     // L
    parity: u32,   // the layer's parity
    dir: u32,      // 0: z_from_x (density direction), 1: x_from_z (sampling direction)
    src: u32,      // the layer's input snapshot (n x V)
    dst: u32,      // its output snapshot (n x V)
    input: u32,    // the conditioner's input, the masked field (rows)
    out: u32,      // its output (rows x NRAW)
    out_bar: u32,  // that output's adjoint
    params: u32,   // the layer's first parameter (in grad: 1 + params, after the loss)
    ld: u32,       // log det per (sample, site) (n x V), summed by the loss
    init_ld: u32,  // 1: this layer starts the log det at 0
    bar: u32,      // adjoints of the current snapshot (n x V)
    inv_n: f32,    // 1 / batch: the loss is a mean
    mode: u32,     // loss_main: 1 reverse KL (phi^4) and adjoints, 2 log q, 3 x and log det
    loss: u32,     // per-sample loss terms (n)
    display: u32,  // display output: log q (n) or x and log det (n x (V + 1))
    z0: u32,       // the latent snapshot (reverse KL)
    hidden: u32,   // h_0 .. h_DEPTH (rows x W each)
    acts: u32,     // gelu(h_0) .. gelu(h_{DEPTH-1})
    h_bar: u32,    // the adjoints of h_0 .. h_DEPTH
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> op: LatticeOp;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
// the loss, then the gradient
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

fn volume() -> u32 {
    return op.size * op.size;
}

fn rows() -> u32 {
    return COPIES * op.n * volume();
}

fn is_active(s: u32) -> bool {
    return (s / op.size + s % op.size + op.parity) % 2u == 1u;
}

// The row of sample i's site s in copy c.
fn row_of(c: u32, i: u32, s: u32) -> u32 {
    return (c * op.n + i) * volume() + s;
}

// The row of the site `sign * offset(t)` away from row r's site, same field.
fn tap_row(r: u32, t: u32, sign: i32) -> u32 {
    let l = i32(op.size);
    let s = r % volume();
    let y = i32(s / op.size) + sign * (i32(t / 3u) - 1);
    let x = i32(s % op.size) + sign * (i32(t % 3u) - 1);
    let site = u32(((y + l) % l) * l + (x + l) % l);
    return r - s + site;
}

// Convolution k (0: input, 1..DEPTH: blocks, DEPTH + 1: output): its input
// channels, output channels and where its kernel starts in params (the bias
// follows the kernel).
fn conv_in(k: u32) -> u32 {
    return select(W, 1u, k == 0u);
}

fn conv_out(k: u32) -> u32 {
    return select(W, NRAW, k == DEPTH + 1u);
}

fn conv_size(k: u32) -> u32 {
    return (TAPS * conv_in(k) + 1u) * conv_out(k);
}

fn conv_start(k: u32) -> u32 {
    var at = op.params;
    for (var j = 0u; j < k; j++) {
        at += conv_size(j);
    }
    return at;
}

fn hidden_at(k: u32, r: u32) -> u32 {
    return op.hidden + (k * rows() + r) * W;
}

fn act_at(k: u32, r: u32) -> u32 {
    return op.acts + (k * rows() + r) * W;
}

fn h_bar_at(k: u32, r: u32) -> u32 {
    return op.h_bar + (k * rows() + r) * W;
}

// The sample a workgroup takes (workgroups form a 2D grid).
fn sample_of(wg: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wg.x + wg.y * groups.x;
}

// Sample i's conditioner: the masked input, hidden states, activations and
// raw values, into work. Thread `lid` takes every THREADS-th entry of a stage.
fn conditioner_forward(i: u32, lid: u32) {
    let v = volume();
    for (var e = lid; e < COPIES * v; e += THREADS) {
        let c = e / v;
        let s = e % v;
        var x = 0.0;
        if (!is_active(s)) {
            x = work[op.src + i * v + s];
            if (c == 1u) {
                x = -x;
            }
        }
        work[op.input + row_of(c, i, s)] = x;
    }
    storageBarrier();
    let first = conv_start(0u);
    for (var e = lid; e < COPIES * v * W; e += THREADS) {
        let r = row_of(e / (v * W), i, (e / W) % v);
        let j = e % W;
        var acc = params[first + TAPS * W + j];
        for (var t = 0u; t < TAPS; t++) {
            acc += work[op.input + tap_row(r, t, 1)] * params[first + t * W + j];
        }
        work[hidden_at(0u, r) + j] = acc;
        if (DEPTH > 0u) {
            work[act_at(0u, r) + j] = gelu(acc);
        }
    }
    storageBarrier();
    for (var k = 1u; k <= DEPTH; k++) {
        let kernel = conv_start(k);
        for (var e = lid; e < COPIES * v * W; e += THREADS) {
            let r = row_of(e / (v * W), i, (e / W) % v);
            let j = e % W;
            var acc = work[hidden_at(k - 1u, r) + j] + params[kernel + TAPS * W * W + j];
            for (var t = 0u; t < TAPS; t++) {
                let a = act_at(k - 1u, tap_row(r, t, 1));
                for (var c = 0u; c < W; c++) {
                    acc += work[a + c] * params[kernel + (t * W + c) * W + j];
                }
            }
            work[hidden_at(k, r) + j] = acc;
            if (k < DEPTH) {
                work[act_at(k, r) + j] = gelu(acc);
            }
        }
        storageBarrier();
    }
    let last = conv_start(DEPTH + 1u);
    for (var e = lid; e < COPIES * v * NRAW; e += THREADS) {
        let r = row_of(e / (v * NRAW), i, (e / NRAW) % v);
        let q = e % NRAW;
        var acc = params[last + TAPS * W * NRAW + q];
        for (var t = 0u; t < TAPS; t++) {
            let h = hidden_at(DEPTH, tap_row(r, t, 1));
            for (var c = 0u; c < W; c++) {
                acc += work[h + c] * params[last + (t * W + c) * NRAW + q];
            }
        }
        work[op.out + r * NRAW + q] = acc;
    }
    storageBarrier();
}

// Sample i's site s's raw values from the conditioner's output.
fn load_raw(i: u32, s: u32) {
    for (var q = 0u; q < NRAW; q++) {
        let plus = work[op.out + row_of(0u, i, s) * NRAW + q];
        if (COPIES == 2u) {
            let minus = work[op.out + row_of(1u, i, s) * NRAW + q];
            raw[q] = 0.5 * select(plus + minus, plus - minus, odd[q] == 1u);
        } else {
            raw[q] = plus;
        }
    }
}

// One layer forward for one field: the conditioner, then the active sites
// through their stacks and the passive ones copied (dst and the log det).
@compute @workgroup_size(128)
fn layer_forward_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let i = sample_of(wg, groups);
    // uniform across the workgroup, so the barriers below are reached by all
    if (i >= op.n) {
        return;
    }
    conditioner_forward(i, lid.x);
    let v = volume();
    for (var s = lid.x; s < v; s += THREADS) {
        let k = i * v + s;
        var ld = 0.0;
        if (op.init_ld == 0u) {
            ld = work[op.ld + k];
        }
        let x = work[op.src + k];
        if (is_active(s)) {
            load_raw(i, s);
            let out = stack_apply(x, op.dir);
            work[op.dst + k] = out.x;
            ld += out.y;
        } else {
            work[op.dst + k] = x;
        }
        work[op.ld + k] = ld;
    }
}

// Backward through sample i's site s's stack in the sampling direction (the
// lattice flows train by reverse KL): the site's adjoint becomes that of its
// input, and its raw adjoints go to the conditioner's output adjoint (split
// over the two copies in the Z2 design). Passive sites' rows get 0.
fn site_backward(i: u32, s: u32) {
    let v = volume();
    if (!is_active(s)) {
        for (var c = 0u; c < COPIES; c++) {
            for (var q = 0u; q < NRAW; q++) {
                work[op.out_bar + row_of(c, i, s) * NRAW + q] = 0.0;
            }
        }
        return;
    }
    let k = i * v + s;
    load_raw(i, s);
    let top = stack_apply(work[op.src + k], 1u).x;
    for (var q = 0u; q < NRAW; q++) {
        raw_bar[q] = 0.0;
    }
    let ld_bar = -op.inv_n;
    var bar = work[op.bar + k];
    for (var jj = 0u; jj < K; jj++) {
        let j = K - 1u - jj;
        var x = top;
        if (j + 1u < K) {
            x = trace[j + 1u];
        }
        bar = x_from_z_vjp(j, trace[j], x, bar, ld_bar);
    }
    work[op.bar + k] = bar;
    for (var q = 0u; q < NRAW; q++) {
        if (COPIES == 2u) {
            work[op.out_bar + row_of(0u, i, s) * NRAW + q] = 0.5 * raw_bar[q];
            work[op.out_bar + row_of(1u, i, s) * NRAW + q] =
                select(0.5, -0.5, odd[q] == 1u) * raw_bar[q];
        } else {
            work[op.out_bar + row_of(0u, i, s) * NRAW + q] = raw_bar[q];
        }
    }
}

// One layer backward for one field (the adjoints of its output snapshot in
// bar): the conditioner again (only the snapshots are kept between the
// passes), the stacks' reverse mode, and the conditioner's adjoints level by
// level (h_bar, kept for weight_grad_main) down to the passive sites', added
// to bar (the zeroed active sites carry nothing).
@compute @workgroup_size(128)
fn layer_backward_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let i = sample_of(wg, groups);
    // uniform across the workgroup, so the barriers below are reached by all
    if (i >= op.n) {
        return;
    }
    conditioner_forward(i, lid.x);
    let v = volume();
    for (var s = lid.x; s < v; s += THREADS) {
        site_backward(i, s);
    }
    storageBarrier();
    // h_bar_DEPTH = conv_out^T(out_bar) (no activation before the output)
    let last = conv_start(DEPTH + 1u);
    for (var e = lid.x; e < COPIES * v * W; e += THREADS) {
        let r = row_of(e / (v * W), i, (e / W) % v);
        let c = e % W;
        var acc = 0.0;
        for (var t = 0u; t < TAPS; t++) {
            let y = op.out_bar + tap_row(r, t, -1) * NRAW;
            for (var q = 0u; q < NRAW; q++) {
                acc += work[y + q] * params[last + (t * W + c) * NRAW + q];
            }
        }
        work[h_bar_at(DEPTH, r) + c] = acc;
    }
    storageBarrier();
    // residual blocks: h_bar_{k-1} = h_bar_k + conv_k^T(h_bar_k) gelu'(h_{k-1})
    for (var kk = 0u; kk < DEPTH; kk++) {
        let k = DEPTH - kk;
        let kernel = conv_start(k);
        for (var e = lid.x; e < COPIES * v * W; e += THREADS) {
            let r = row_of(e / (v * W), i, (e / W) % v);
            let c = e % W;
            var acc = 0.0;
            for (var t = 0u; t < TAPS; t++) {
                let y = h_bar_at(k, tap_row(r, t, -1));
                for (var j = 0u; j < W; j++) {
                    acc += work[y + j] * params[kernel + (t * W + c) * W + j];
                }
            }
            let slope = gelu_prime(work[hidden_at(k - 1u, r) + c]);
            work[h_bar_at(k - 1u, r) + c] = work[h_bar_at(k, r) + c] + acc * slope;
        }
        storageBarrier();
    }
    // the passive sites: bar += conv_0^T(h_bar_0), the negated copy's with a minus
    let first = conv_start(0u);
    for (var s = lid.x; s < v; s += THREADS) {
        if (!is_active(s)) {
            var b = 0.0;
            for (var c = 0u; c < COPIES; c++) {
                let r = row_of(c, i, s);
                var acc = 0.0;
                for (var t = 0u; t < TAPS; t++) {
                    let y = h_bar_at(0u, tap_row(r, t, -1));
                    for (var j = 0u; j < W; j++) {
                        acc += work[y + j] * params[first + t * W + j];
                    }
                }
                b += select(acc, -acc, c == 1u);
            }
            work[op.bar + i * v + s] += b;
        }
    }
}

var<workgroup> partial: array<f32, REDUCE>;

// The layer's parameter gradient after its backward pass, one workgroup an
// entry (numbered as in params): the sum over every row of the batch of the
// convolution's input at the entry's tap times its output adjoint (a bias
// entry's input being 1), reduced in workgroup memory.
@compute @workgroup_size(256)
fn weight_grad_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let entry = wg.x + wg.y * groups.x;
    var e = entry;
    var k = 0u;
    // uniform across the workgroup, so the barriers below are reached by all
    loop {
        if (k > DEPTH + 1u) {
            return;
        }
        if (e < conv_size(k)) {
            break;
        }
        e -= conv_size(k);
        k += 1u;
    }
    let c_in = conv_in(k);
    let c_out = conv_out(k);
    let j = e % c_out;
    let row = e / c_out;
    let bias = row == TAPS * c_in;
    let t = row / c_in;
    let c = row % c_in;
    var s = 0.0;
    for (var r = lid.x; r < rows(); r += REDUCE) {
        var y = 0.0;
        if (k <= DEPTH) {
            y = work[h_bar_at(k, r) + j];
        } else {
            y = work[op.out_bar + r * NRAW + j];
        }
        var x = 1.0;
        if (!bias) {
            let src = tap_row(r, t, 1);
            if (k == 0u) {
                x = work[op.input + src];
            } else if (k <= DEPTH) {
                x = work[act_at(k - 1u, src) + c];
            } else {
                x = work[hidden_at(DEPTH, src) + c];
            }
        }
        s += x * y;
    }
    partial[lid.x] = s;
    workgroupBarrier();
    for (var w = REDUCE / 2u; w > 0u; w >>= 1u) {
        if (lid.x < w) {
            partial[lid.x] += partial[lid.x + w];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        grad[1u + op.params + entry] = partial[0];
    }
}

// The phi^4 action at sample i's field (in `src`), its gradient into bar
// scaled by `scale`: S = sum_x [(phi_{x+1} - phi_x)^2 + (phi_{x+L} - phi_x)^2
// + m^2 phi_x^2 + lambda phi_x^4] (src/target/phi4.rs).
fn action(i: u32, scale: f32) -> f32 {
    let l = op.size;
    let at = op.src + i * volume();
    var s = 0.0;
    for (var site = 0u; site < volume(); site++) {
        let y = site / l;
        let x = site % l;
        let p = work[at + site];
        let right = work[at + y * l + (x + 1u) % l];
        let left = work[at + y * l + (x + l - 1u) % l];
        let down = work[at + ((y + 1u) % l) * l + x];
        let up = work[at + ((y + l - 1u) % l) * l + x];
        let p2 = p * p;
        s += (right - p) * (right - p) + (down - p) * (down - p) + M2 * p2 + LAMBDA * p2 * p2;
        let g = 2.0 * M2 * p + 4.0 * LAMBDA * p2 * p + 2.0 * (4.0 * p - right - left - down - up);
        work[op.bar + i * volume() + site] = g * scale;
    }
    return s;
}

// The loss term and the adjoints of the final snapshot (`src`), or the display
// outputs. One thread per sample.
@compute @workgroup_size(64)
fn loss_main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= op.n) {
        return;
    }
    let v = volume();
    let row = op.src + i * v;
    var ld = 0.0;
    var sq = 0.0;
    for (var s = 0u; s < v; s++) {
        ld += work[op.ld + i * v + s];
        let x = work[row + s];
        sq += x * x;
    }
    let log_normal = -0.5 * sq - 0.5 * f32(v) * LOG_2PI;
    if (op.mode == 1u) {
        // log N(z) - log det + S(x), with x = x_from_z(z)
        var zsq = 0.0;
        for (var s = 0u; s < v; s++) {
            let z = work[op.z0 + i * v + s];
            zsq += z * z;
        }
        let s_x = action(i, op.inv_n);
        work[op.loss + i] = (-0.5 * zsq - 0.5 * f32(v) * LOG_2PI - ld + s_x) * op.inv_n;
    } else if (op.mode == 2u) {
        work[op.display + i] = log_normal + ld;
    } else {
        for (var s = 0u; s < v; s++) {
            work[op.display + i * (v + 1u) + s] = work[row + s];
        }
        work[op.display + i * (v + 1u) + v] = ld;
    }
}
