// decode32_q5_k  one 32-value sub-block of a Q5_K super-block for matmul_vec: raw loads (quants, fifth bits, packed
//                scales, (d, dmin)), vals = q; d = d·sc and m = -(dmin·m) of the sub-block
// Layout         repacked: qs [n_blocks] vec4<u32> | qh one word per 32 values at word info.qh (bit j: value j;
//                repack.rs) | scales 3 words per 256 values at info.sc | (d, dmin) one word per 256 values at info.d
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: small integers; x = (d·sc)·q - dmin·m is applied per block by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = 0.0;

struct Raw { q: vec4<u32>, h: u32, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let sm = vec2<f32>(scale_min_k4(vec3<u32>(word(s), word(s + 1u), word(s + 2u)), blk & 7u));
    let dm = unpack2x16float(word(info.d + sb));
    return Raw(wload(blk), word(info.qh + blk), dm.x * sm.x, -(dm.y * sm.y), 0.0, 0.0);
}

// Nibbles of word `q` (low or high by `shift`) with the fifth bits of values j .. j+3.
fn q5k4(q: u32, shift: u32, h: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(nib4(q, shift) | (bits4(h, j) << vec4<u32>(4u)));
}

fn vals(r: Raw) -> Blk {
    return Blk(q5k4(r.q.x, 0u, r.h, 0u), q5k4(r.q.y, 0u, r.h, 4u), q5k4(r.q.z, 0u, r.h, 8u), q5k4(r.q.w, 0u, r.h, 12u),
               q5k4(r.q.x, 4u, r.h, 16u), q5k4(r.q.y, 4u, r.h, 20u), q5k4(r.q.z, 4u, r.h, 24u), q5k4(r.q.w, 4u, r.h, 28u));
}

fn ints(r: Raw) -> Ints {
    return five_bit_ints(r.q, r.h);
}
