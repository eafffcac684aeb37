// decode32_q4_1  one whole Q4_1 block for matmul_vec: raw loads (one vec4 of quants, (d, m)), vals = q
// Layout         repacked: qs [n_blocks] vec4<u32> | (d, m) f16 pairs, one word per block, at word info.d
// Launch         none (joined into matmul_vec); quads as in decode32_q4_0
// Numerics       exact: small integers; x = q·d + m is applied per block by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = 0.0;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let dm = unpack2x16float(word(info.d + blk));
    return Raw(wload(blk), dm.x, dm.y, 0.0, 0.0);
}

fn vals(r: Raw) -> Blk {
    return Blk(vec4<f32>(nib4(r.q.x, 0u)), vec4<f32>(nib4(r.q.y, 0u)),
               vec4<f32>(nib4(r.q.z, 0u)), vec4<f32>(nib4(r.q.w, 0u)),
               vec4<f32>(nib4(r.q.x, 4u)), vec4<f32>(nib4(r.q.y, 4u)),
               vec4<f32>(nib4(r.q.z, 4u)), vec4<f32>(nib4(r.q.w, 4u)));
}

fn ints(r: Raw) -> Ints {
    return nibble_ints(r.q);
}
