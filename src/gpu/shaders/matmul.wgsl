// The coupling conditioner's dense layers as one tiled matrix product,
// C(i, j) = sum_k A(i, k) B(k, j), 16 x 16 tiles in workgroup memory. Every
// operand is addressed by (offset, row stride, column stride), so transposes
// and the checker mask's strided coordinates need no copies; the flags select
// where operands live and what happens around the product (src/flow/nn/mlp.rs):
//
//   forward       h' = [g(h) | 1] [W; b] (+ h)       (A gets a ones column)
//   weight grad   [dW; db] = [g(h) | 1]^T h_bar      (A^T gets a ones row)
//   input grad    h_bar' = R + (h_bar W^T) * gelu'(H)   or   R + h_bar W^T

#import lib/gelu.wgsl

struct Operand {
    offset: u32,
    row: u32,
    col: u32,
    pad: u32,
}

struct MatOp {
    m: u32,
    n: u32,
    k: u32,
    // bit 0: gelu on A; bit 1: A's last column is ones; bit 2: A's last row is
    // ones; bit 3: B from params (else work); bit 4: C to grad (else work);
    // bits 5-6: epilogue 0 store, 1 add R, 2 add R + C * gelu'(H)
    flags: u32,
    a: Operand,
    b: Operand,
    c: Operand,
    // R and H share C's strides
    r_offset: u32,
    h_offset: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> op: MatOp;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

var<workgroup> tile_a: array<array<f32, 16>, 16>;
var<workgroup> tile_b: array<array<f32, 16>, 16>;

// gelu, gelu_prime: lib/gelu.wgsl

fn a_at(i: u32, k: u32) -> f32 {
    if (i >= op.m || k >= op.k) {
        return 0.0;
    }
    if (((op.flags & 2u) != 0u && k == op.k - 1u) || ((op.flags & 4u) != 0u && i == op.m - 1u)) {
        return 1.0;
    }
    let v = work[op.a.offset + i * op.a.row + k * op.a.col];
    if ((op.flags & 1u) != 0u) {
        return gelu(v);
    }
    return v;
}

fn b_at(k: u32, j: u32) -> f32 {
    if (k >= op.k || j >= op.n) {
        return 0.0;
    }
    let idx = op.b.offset + k * op.b.row + j * op.b.col;
    if ((op.flags & 8u) != 0u) {
        return params[idx];
    }
    return work[idx];
}

@compute @workgroup_size(16, 16)
fn matmul_main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let i = wg.y * 16u + lid.y;
    let j = wg.x * 16u + lid.x;
    var acc = 0.0;
    for (var t = 0u; t < op.k; t += 16u) {
        tile_a[lid.y][lid.x] = a_at(i, t + lid.x);
        tile_b[lid.y][lid.x] = b_at(t + lid.y, j);
        workgroupBarrier();
        for (var q = 0u; q < 16u; q++) {
            acc += tile_a[lid.y][q] * tile_b[q][lid.x];
        }
        workgroupBarrier();
    }
    if (i >= op.m || j >= op.n) {
        return;
    }
    let at = i * op.c.row + j * op.c.col;
    let epilogue = (op.flags >> 5u) & 3u;
    if (epilogue == 1u) {
        acc += work[op.r_offset + at];
    } else if (epilogue == 2u) {
        acc = work[op.r_offset + at] + acc * gelu_prime(work[op.h_offset + at]);
    }
    if ((op.flags & 16u) != 0u) {
        grad[op.c.offset + at] = acc;
    } else {
        work[op.c.offset + at] = acc;
    }
}
