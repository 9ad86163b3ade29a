// Lattice coupling flows on the GPU, the per-site parts (src/flow/lattice.rs):
// the conditioner's masked input, each active site's scalar stack and its
// reverse mode, the adjoint of the masked input, and the phi^4 loss. The
// convolutions run in conv3x3.wgsl. Fields are rows of n x V, site s = y * L + x;
// layer sites with (x + y + parity) odd are active.
//
// The Z2-equivariant design (COPIES = 2) runs the conditioner on the field and
// on its negation (rows n V .. 2 n V); raw value q takes the odd part
// (N(+) - N(-)) / 2 where ODD marks it, the even part otherwise.

#import lib/stack.wgsl

const COPIES: u32 = {COPIES}u;
const M2: f32 = {M2};
const LAMBDA: f32 = {LAMBDA};
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
    input: u32,    // the conditioner's input (COPIES n V)
    out: u32,      // its output (COPIES n V x NRAW)
    out_bar: u32,  // that output's adjoint
    in_bar: u32,   // the input's adjoint (COPIES n V)
    ld: u32,       // log det per (sample, site) (n x V), summed by the loss
    init_ld: u32,  // 1: this layer starts the log det at 0
    bar: u32,      // adjoints of the current snapshot (n x V)
    inv_n: f32,    // 1 / batch: the loss is a mean
    mode: u32,     // 1: reverse KL (phi^4) and adjoints, 2: log q, 3: x and log det
    loss: u32,     // per-sample loss terms (n)
    display: u32,  // display output: log q (n) or x and log det (n x (V + 1))
    z0: u32,       // the latent snapshot (reverse KL)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> op: LatticeOp;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;

fn volume() -> u32 {
    return op.size * op.size;
}

fn is_active(s: u32) -> bool {
    return (s / op.size + s % op.size + op.parity) % 2u == 1u;
}

fn flat(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 64u;
}

// The field with the active sites zeroed, and (Z2) its negation after it.
@compute @workgroup_size(64)
fn mask_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let e = flat(gid, groups);
    let nv = op.n * volume();
    if (e >= COPIES * nv) {
        return;
    }
    let k = e % nv;
    var v = 0.0;
    if (!is_active(k % volume())) {
        v = work[op.src + k];
        if (e >= nv) {
            v = -v;
        }
    }
    work[op.input + e] = v;
}

// Site row k's raw values from the conditioner's output.
fn load_raw(k: u32) {
    let nv = op.n * volume();
    for (var q = 0u; q < NRAW; q++) {
        let plus = work[op.out + k * NRAW + q];
        if (COPIES == 2u) {
            let minus = work[op.out + (nv + k) * NRAW + q];
            raw[q] = 0.5 * select(plus + minus, plus - minus, odd[q] == 1u);
        } else {
            raw[q] = plus;
        }
    }
}

// One thread per (sample, site): active sites through their stacks, passive
// ones copied.
@compute @workgroup_size(64)
fn couple_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let k = flat(gid, groups);
    if (k >= op.n * volume()) {
        return;
    }
    var ld = 0.0;
    if (op.init_ld == 0u) {
        ld = work[op.ld + k];
    }
    let v = work[op.src + k];
    if (is_active(k % volume())) {
        load_raw(k);
        let s = stack_apply(v, op.dir);
        work[op.dst + k] = s.x;
        ld += s.y;
    } else {
        work[op.dst + k] = v;
    }
    work[op.ld + k] = ld;
}

// Backward through one layer's stacks in the sampling direction: an active
// site's adjoint becomes that
// of its input and its raw adjoints go to the conditioner's output adjoint
// (split over the two copies in the Z2 design); passive sites' rows get 0.
@compute @workgroup_size(64)
fn couple_back_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let k = flat(gid, groups);
    let nv = op.n * volume();
    if (k >= nv) {
        return;
    }
    if (!is_active(k % volume())) {
        for (var c = 0u; c < COPIES; c++) {
            for (var q = 0u; q < NRAW; q++) {
                work[op.out_bar + (c * nv + k) * NRAW + q] = 0.0;
            }
        }
        return;
    }
    let ld_bar = -op.inv_n;
    load_raw(k);
    let v = work[op.src + k];
    let top = stack_apply(v, 1u).x;
    for (var q = 0u; q < NRAW; q++) {
        raw_bar[q] = 0.0;
    }
    // the sampling direction only: lattice flows train by reverse KL
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
            work[op.out_bar + k * NRAW + q] = 0.5 * raw_bar[q];
            work[op.out_bar + (nv + k) * NRAW + q] = select(0.5, -0.5, odd[q] == 1u) * raw_bar[q];
        } else {
            work[op.out_bar + k * NRAW + q] = raw_bar[q];
        }
    }
}

// The conditioner's input adjoint into the passive sites' adjoints (the
// zeroed active sites carry nothing).
@compute @workgroup_size(64)
fn passive_bar_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let k = flat(gid, groups);
    let nv = op.n * volume();
    if (k >= nv || is_active(k % volume())) {
        return;
    }
    var b = work[op.bar + k] + work[op.in_bar + k];
    if (COPIES == 2u) {
        b -= work[op.in_bar + nv + k];
    }
    work[op.bar + k] = b;
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
