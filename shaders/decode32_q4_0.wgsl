// decode32_q4_0  one whole Q4_0 block for matmul_vec: raw loads (one vec4 of quants, one scale), vals = q - 8
// Layout         repacked: qs [n_blocks] vec4<u32> (16 bytes per block) | d f16 pairs at word info.d
// Launch         none (joined into matmul_vec); value j is the low nibble of byte j (j < 16), else the
//                high nibble of byte j - 16; so quad i is word i's low nibbles and quad 4 + i its high ones
// Numerics       exact: small integers; the f16 scale is applied per block by the caller

const HAS_MIN: bool = false;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = -8.0;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    return Raw(wload(blk), half_of(info.d, blk), 0.0, 0.0, 0.0);
}

fn vals(r: Raw) -> Blk {
    let o = vec4<f32>(8.0);
    return Blk(vec4<f32>(nib4(r.q.x, 0u)) - o, vec4<f32>(nib4(r.q.y, 0u)) - o,
               vec4<f32>(nib4(r.q.z, 0u)) - o, vec4<f32>(nib4(r.q.w, 0u)) - o,
               vec4<f32>(nib4(r.q.x, 4u)) - o, vec4<f32>(nib4(r.q.y, 4u)) - o,
               vec4<f32>(nib4(r.q.z, 4u)) - o, vec4<f32>(nib4(r.q.w, 4u)) - o);
}

fn ints(r: Raw) -> Ints {
    return nibble_ints(r.q);
}
