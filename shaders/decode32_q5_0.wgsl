// decode32_q5_0  one whole Q5_0 block for matmul_vec: raw loads (quants, high bits, scale), vals = q - 16
// Layout         repacked: qs [n_blocks] vec4<u32> | qh one word per block at word info.qh | d f16 pairs at info.d
// Launch         none (joined into matmul_vec); quads as in decode32_q4_0, bit j of qh is value j's fifth bit
// Numerics       exact: small integers; the f16 scale is applied per block by the caller

const HAS_MIN: bool = false;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = -16.0;

struct Raw { q: vec4<u32>, h: u32, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    return Raw(wload(blk), word(info.qh + blk), half_of(info.d, blk), 0.0, 0.0, 0.0);
}

// Fifth bits of values j .. j+3, as 16s.
fn hi4(h: u32, j: u32) -> vec4<u32> {
    return ((vec4<u32>(h >> j) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) << vec4<u32>(4u);
}

fn vals(r: Raw) -> Blk {
    let o = vec4<f32>(16.0);
    return Blk(vec4<f32>(nib4(r.q.x, 0u) | hi4(r.h, 0u)) - o, vec4<f32>(nib4(r.q.y, 0u) | hi4(r.h, 4u)) - o,
               vec4<f32>(nib4(r.q.z, 0u) | hi4(r.h, 8u)) - o, vec4<f32>(nib4(r.q.w, 0u) | hi4(r.h, 12u)) - o,
               vec4<f32>(nib4(r.q.x, 4u) | hi4(r.h, 16u)) - o, vec4<f32>(nib4(r.q.y, 4u) | hi4(r.h, 20u)) - o,
               vec4<f32>(nib4(r.q.z, 4u) | hi4(r.h, 24u)) - o, vec4<f32>(nib4(r.q.w, 4u) | hi4(r.h, 28u)) - o);
}

fn ints(r: Raw) -> Ints {
    return five_bit_ints(r.q, r.h);
}
