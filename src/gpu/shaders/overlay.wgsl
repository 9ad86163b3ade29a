// What the model view draws over its heat map, straight from the buffers the
// flow's display kernel wrote (x, y and log |det dx/dz| per point): the
// deformed grid as anti-aliased segments shaded by how much the flow
// stretches there (light where mass spreads, dark where it gathers), and the
// model samples as small dots. Drawn in an egui paint callback, whose
// viewport is the view: data space [-4, 4] x [-4, 4] fills it, y up.

struct View {
    size: vec2<f32>,      // the view in physical pixels
    radius: f32,          // a sample's radius, pixels
    half_width: f32,      // half a grid line's width, pixels
    linear_out: u32,      // 1: the target stores linear colour (sRGB format)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> view: View;

// the view's half side in data space (app::playground::picture::VIEW)
const HALF_SIDE: f32 = 4.0;

fn is_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

fn usable(p: vec3<f32>) -> bool {
    // far outside the view a point is not drawn (nor is a segment to it)
    return is_finite(p.x) && is_finite(p.y) && is_finite(p.z)
        && abs(p.x) < 1.0e4 && abs(p.y) < 1.0e4;
}

// data space to pixels from the view's centre, y up
fn pixels(p: vec2<f32>) -> vec2<f32> {
    return p / HALF_SIDE * 0.5 * view.size;
}

fn clip(px: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(px / (0.5 * view.size), 0.0, 1.0);
}

// nothing drawn: every corner at one point outside the view
const NOWHERE = vec4<f32>(2.0, 2.0, 0.0, 1.0);

// egui's colours are sRGB bytes; an sRGB target wants them linear
fn output(gamma: vec3<f32>, alpha: f32) -> vec4<f32> {
    var rgb = gamma;
    if (view.linear_out == 1u) {
        let low = gamma / 12.92;
        let high = pow((gamma + 0.055) / 1.055, vec3<f32>(2.4));
        rgb = select(high, low, gamma <= vec3<f32>(0.04045));
    }
    // premultiplied, as egui blends
    return vec4<f32>(rgb * alpha, alpha);
}

// the two triangles of a quad, as (along, across) in -1..1
fn corner(v: u32) -> vec2<f32> {
    var corners = array<vec2<f32>, 6>(
        vec2<f32>(-1.0, -1.0), vec2<f32>(1.0, -1.0), vec2<f32>(-1.0, 1.0),
        vec2<f32>(-1.0, 1.0), vec2<f32>(1.0, -1.0), vec2<f32>(1.0, 1.0),
    );
    return corners[v];
}

struct SampleOut {
    @builtin(position) position: vec4<f32>,
    // pixels from the sample's centre
    @location(0) offset: vec2<f32>,
}

@vertex
fn sample_vs(@builtin(vertex_index) v: u32, @location(0) point: vec3<f32>) -> SampleOut {
    var out: SampleOut;
    if (!usable(point)) {
        out.position = NOWHERE;
        return out;
    }
    // a pixel more than the dot, for its soft edge
    out.offset = corner(v) * (view.radius + 1.0);
    out.position = clip(pixels(point.xy) + out.offset);
    return out;
}

@fragment
fn sample_fs(in: SampleOut) -> @location(0) vec4<f32> {
    let cover = clamp(view.radius + 0.5 - length(in.offset), 0.0, 1.0);
    return output(vec3<f32>(255.0, 120.0, 60.0) / 255.0, cover);
}

struct LineOut {
    @builtin(position) position: vec4<f32>,
    // pixels across the segment from its middle
    @location(0) across: f32,
    @location(1) shade: f32,
}

@vertex
fn line_vs(
    @builtin(vertex_index) v: u32,
    @location(0) a: vec3<f32>,
    @location(1) b: vec3<f32>,
    @location(2) joined: f32,
) -> LineOut {
    var out: LineOut;
    if (joined == 0.0 || !usable(a) || !usable(b)) {
        out.position = NOWHERE;
        return out;
    }
    let pa = pixels(a.xy);
    let pb = pixels(b.xy);
    let d = pb - pa;
    let len = length(d);
    let along = select(vec2<f32>(1.0, 0.0), d / len, len > 1.0e-6);
    let normal = vec2<f32>(-along.y, along.x);
    let c = corner(v);
    // the end points, the width and a pixel of soft edge
    let reach = view.half_width + 1.0;
    let at = select(pa, pb, c.x > 0.0) + along * c.x * 0.5 + normal * c.y * reach;
    out.position = clip(at);
    out.across = c.y * reach;
    // as the CPU's picture shades a segment: by its ends' mean log det
    let t = clamp(0.5 + 0.25 * 0.5 * (a.z + b.z), 0.0, 1.0);
    out.shade = (90.0 + 165.0 * t) / 255.0;
    return out;
}

@fragment
fn line_fs(in: LineOut) -> @location(0) vec4<f32> {
    let cover = clamp(view.half_width + 0.5 - abs(in.across), 0.0, 1.0);
    return output(vec3<f32>(in.shade), cover * 170.0 / 255.0);
}
