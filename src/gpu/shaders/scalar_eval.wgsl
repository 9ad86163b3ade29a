// Applies one scalar bijection (raw parameters shared by all points) to a batch:
// out[i] = f(x[i]) or f^-1(x[i]), with log f' at the point on the x_from_z side.

struct Settings {
    family: u32,      // 0 cubic rational, 1 sinh, 2 cubic, 3 affine
    direction: u32,   // 0 x_from_z, 1 z_from_x
    n: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> settings: Settings;
@group(0) @binding(1) var<storage, read> raw: array<f32>;
@group(0) @binding(2) var<storage, read> points: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= settings.n) {
        return;
    }
    let x = points[i];
    let inverse = settings.direction == 1u;
    var r: vec2<f32>;
    switch settings.family {
        case 0u: {
            let b = cubic_rational_from_raw(raw[0], raw[1], raw[2]);
            r = select(cubic_rational_forward(b, x), cubic_rational_inverse(b, x), inverse);
        }
        case 1u: {
            let b = sinh_from_raw(raw[0], raw[1], raw[2], raw[3], raw[4]);
            r = select(sinh_forward(b, x), sinh_inverse(b, x), inverse);
        }
        case 2u: {
            let b = cubic_from_raw(raw[0], raw[1], raw[2], raw[3]);
            r = select(cubic_forward(b, x), cubic_inverse(b, x), inverse);
        }
        default: {
            r = select(affine_forward(raw[0], raw[1], x), affine_inverse(raw[0], raw[1], x), inverse);
        }
    }
    out[i] = r;
}
