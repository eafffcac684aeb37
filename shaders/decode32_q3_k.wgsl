// decode32_q3_k  one 32-value block (two 16-value sub-blocks) of a Q3_K super-block for matmul_vec: raw loads (two
//                words of 2-bit quants, the hmask word, the packed scales, d), vals = q in -4..=3; per half d·sc
// Layout         repacked: qs 2 words per 32 values from word 0 (2-bit planes) | hmask one word per 32 values at word
//                info.qh (bit j: value j; repack.rs) | scales 3 words per 256 values at info.sc | d f16 pairs at info.d
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: small integers; x = (d·sc)·q is applied per half by the caller (HALVES)

const HAS_MIN: bool = false;
const HALVES: bool = true;

struct Raw { q: vec2<u32>, h: u32, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let v = wload(blk >> 1u);
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let packed = vec3<u32>(word(s), word(s + 1u), word(s + 2u));
    let j = 2u * (blk & 7u);
    let d = half_of(info.d, sb);
    let q = select(v.xy, v.zw, (blk & 1u) == 1u);
    return Raw(q, word(info.qh + blk), d * scale_q3_k(packed, j), 0.0, d * scale_q3_k(packed, j + 1u), 0.0);
}

// Values 4i .. 4i+3 of a 16-value half: its word `q`, the block's high bits from bit j = 4i (+ 16).
fn q3k4(q: u32, i: u32, h: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(crumbs4(q, 2u * i) | (bits4(h, j) << vec4<u32>(2u))) - 4.0;
}

fn vals(r: Raw) -> Blk {
    return Blk(q3k4(r.q.x, 0u, r.h, 0u), q3k4(r.q.x, 1u, r.h, 4u), q3k4(r.q.x, 2u, r.h, 8u), q3k4(r.q.x, 3u, r.h, 12u),
               q3k4(r.q.y, 0u, r.h, 16u), q3k4(r.q.y, 1u, r.h, 20u), q3k4(r.q.y, 2u, r.h, 24u), q3k4(r.q.y, 3u, r.h, 28u));
}
