// The batch's loss into grad[0] (one workgroup of 256): the sum of the
// per-sample loss terms, or NaN when any of them or any gradient entry is not
// finite, so the host's one-number read sees a bad step. Shared by the
// coupling and lattice kernels.

struct SumOp {
    n: u32,       // loss terms
    loss: u32,    // their offset in work
    n_grad: u32,  // gradient entries after grad[0]
    pad: u32,
}

@group(0) @binding(0) var<uniform> op: SumOp;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;

var<workgroup> partial: array<f32, 256>;
var<workgroup> bad: array<u32, 256>;

fn is_finite(v: f32) -> bool {
    // a bit test: compilers may assume arithmetic never produces NaN
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

@compute @workgroup_size(256)
fn sum_main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    var s = 0.0;
    var b = 0u;
    for (var i = t; i < op.n; i += 256u) {
        let v = work[op.loss + i];
        s += v;
        b = max(b, select(1u, 0u, is_finite(v)));
    }
    for (var j = t; j < op.n_grad; j += 256u) {
        b = max(b, select(1u, 0u, is_finite(grad[1u + j])));
    }
    partial[t] = s;
    bad[t] = b;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (t < w) {
            partial[t] += partial[t + w];
            bad[t] = max(bad[t], bad[t + w]);
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        // (a runtime NaN: a constant one is a compile error in WGSL)
        grad[0] = select(partial[0], bitcast<f32>(0x7fc00000u + bad[0]), bad[0] != 0u);
    }
}
