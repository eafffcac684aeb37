// rope_common  rope_cs, rotate, rope_pair: one RoPE pair rotation, shared by rope, rope_kv_write(_f16) and rms_norm_rope
// Layout       none (library text)
// Launch       none
// Numerics     f32 angle = pos · freq_scale · (theta^(-2i / n_rot) / ff_i), reduced mod 2π exactly
//              (Cody–Waite, two-part 2π) before sin/cos so large positions keep their accuracy

const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

// cos and sin of pos · freq_scale · theta^(-2i / n_rot) / ff (ff: pair i's frequency factor, 1 for none).
fn rope_cs(pos: u32, i: u32, n_rot: u32, theta: f32, freq_scale: f32, ff: f32) -> vec2<f32> {
    let freq = pow(theta, -2.0 * f32(i) / f32(n_rot)) / ff;
    let angle = f32(pos) * freq_scale * freq;
    let turns = round(angle * INV_TWO_PI);
    let r = fma(-turns, TWO_PI_LO, fma(-turns, TWO_PI_HI, angle));
    return vec2<f32>(cos(r), sin(r));
}

// The pair (a, b) rotated by the angle whose (cos, sin) is cs: written once, so rope and rope_kv_write
// compile the same arithmetic.
fn rotate(a: f32, b: f32, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a * cs.x - b * cs.y, a * cs.y + b * cs.x);
}

// Index pair (within a head) of rotation i: adjacent (normal) or halves (neox).
fn rope_pair(i: u32, n_rot: u32, neox: u32) -> vec2<u32> {
    if (neox != 0u) {
        return vec2<u32>(i, i + n_rot / 2u);
    }
    return vec2<u32>(2u * i, 2u * i + 1u);
}
