// decode32_q4_k  one 32-value sub-block of a Q4_K super-block for matmul_vec: raw loads (one vec4 of quants, the
//                super-block's packed scales and (d, dmin)), vals = q; d = d·sc and m = -(dmin·m) of the sub-block
// Layout         repacked: qs [n_blocks] vec4<u32> (16 bytes per 32 values, as Q4_0; repack.rs) | scales 3 words per
//                256 values at word info.sc | (d, dmin) one word per 256 values at word info.d; quads as decode32_q4_0
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: small integers; x = (d·sc)·q - dmin·m is applied per block by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = 0.0;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let sm = vec2<f32>(scale_min_k4(vec3<u32>(word(s), word(s + 1u), word(s + 2u)), blk & 7u));
    let dm = unpack2x16float(word(info.d + sb));
    return Raw(wload(blk), dm.x * sm.x, -(dm.y * sm.y), 0.0, 0.0);
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
