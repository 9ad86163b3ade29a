// The lattice flows' convolutional conditioner (src/flow/nn/conv.rs): periodic
// 3 x 3 convolutions on the L x L lattice, computed directly (no im2col
// copy). A batch is a matrix with one row per (copy, sample, site), row
// `r = b * V + s`, site `s = y * L + x`, and one column per channel. Kernels
// sit in `params` as conv.rs lays them out: rows (tap, input channel), taps
// (dy, dx) row-major over {-1, 0, 1}^2, then the bias.
//
//   activation    act = gelu(h), once per residual block
//   forward       out = bias + K * x (+ R)
//   input grad    x_bar = K^T-gather(y_bar), or R + x_bar * gelu'(H) (the
//                 residual block's backward)
//   weight grad   grad(K, bias) = sum over rows, one workgroup per entry
//
// The input gradient gathers instead of scattering: tap t of site s reads
// site s + offset(t), so its transpose at site s reads s - offset(t). No atomics.

#import lib/gelu.wgsl

struct ConvOp {
    rows: u32,     // copies x samples x V
    size: u32,     // L
    c_in: u32,
    c_out: u32,
    // bit 1: the input grad stores R + x_bar * gelu'(H); bit 3: the forward adds R
    flags: u32,
    x: u32,        // the layer's input (rows x c_in), in work
    y: u32,        // its output (forward) or output adjoint (backward), rows x c_out
    kernel: u32,   // the kernel's offset in params; the bias follows
    r: u32,        // R (rows x c_out forward, rows x c_in backward)
    h: u32,        // H (rows x c_in)
    grad: u32,     // the kernel's offset in grad
    dst: u32,      // the input adjoint (rows x c_in)
}

@group(0) @binding(0) var<uniform> op: ConvOp;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

const TAPS: u32 = 9u;

// The row of the site `sign * offset(t)` away from row r's site, same sample.
fn tap_row(r: u32, t: u32, sign: i32) -> u32 {
    let l = i32(op.size);
    let v = op.size * op.size;
    let s = r % v;
    let y = i32(s / op.size) + sign * (i32(t / 3u) - 1);
    let x = i32(s % op.size) + sign * (i32(t % 3u) - 1);
    let site = u32(((y + l) % l) * l + (x + l) % l);
    return r - s + site;
}

fn x_at(row: u32, c: u32) -> f32 {
    return work[op.x + row * op.c_in + c];
}

// A flat thread index over a 2D grid of 64-thread workgroups (the grid may
// exceed 65535 workgroups in x).
fn flat(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 64u;
}

// gelu of the rows x c_in values at x, into y.
@compute @workgroup_size(64)
fn gelu_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let e = flat(gid, groups);
    if (e < op.rows * op.c_in) {
        work[op.y + e] = gelu(work[op.x + e]);
    }
}

@compute @workgroup_size(64)
fn conv_forward_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let e = flat(gid, groups);
    if (e >= op.rows * op.c_out) {
        return;
    }
    let r = e / op.c_out;
    let j = e % op.c_out;
    var acc = params[op.kernel + TAPS * op.c_in * op.c_out + j];
    for (var t = 0u; t < TAPS; t++) {
        let src = tap_row(r, t, 1);
        for (var c = 0u; c < op.c_in; c++) {
            acc += x_at(src, c) * params[op.kernel + (t * op.c_in + c) * op.c_out + j];
        }
    }
    if ((op.flags & 8u) != 0u) {
        acc += work[op.r + e];
    }
    work[op.y + e] = acc;
}

@compute @workgroup_size(64)
fn conv_input_grad_main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let e = flat(gid, groups);
    if (e >= op.rows * op.c_in) {
        return;
    }
    let r = e / op.c_in;
    let c = e % op.c_in;
    var acc = 0.0;
    for (var t = 0u; t < TAPS; t++) {
        let src = tap_row(r, t, -1);
        for (var j = 0u; j < op.c_out; j++) {
            acc += work[op.y + src * op.c_out + j] * params[op.kernel + (t * op.c_in + c) * op.c_out + j];
        }
    }
    if ((op.flags & 2u) != 0u) {
        acc = work[op.r + e] + acc * gelu_prime(work[op.h + e]);
    }
    work[op.dst + e] = acc;
}

var<workgroup> partial: array<f32, 256>;

// One workgroup per kernel or bias entry: the sum over every row of the
// batch, reduced in workgroup memory. Entries are numbered as in params.
@compute @workgroup_size(256)
fn conv_weight_grad_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let e = wg.x + wg.y * groups.x;
    let n_kernel = TAPS * op.c_in * op.c_out;
    // uniform across the workgroup, so the barriers below are reached by all
    if (e >= n_kernel + op.c_out) {
        return;
    }
    var s = 0.0;
    if (e < n_kernel) {
        let j = e % op.c_out;
        let t = (e / op.c_out) / op.c_in;
        let c = (e / op.c_out) % op.c_in;
        for (var r = lid.x; r < op.rows; r += 256u) {
            s += x_at(tap_row(r, t, 1), c) * work[op.y + r * op.c_out + j];
        }
    } else {
        let j = e - n_kernel;
        for (var r = lid.x; r < op.rows; r += 256u) {
            s += work[op.y + r * op.c_out + j];
        }
    }
    partial[lid.x] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid.x < w) {
            partial[lid.x] += partial[lid.x + w];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        grad[op.grad + e] = partial[0];
    }
}
