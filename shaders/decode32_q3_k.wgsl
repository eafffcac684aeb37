// decode32_q3_k  one 32-value block (two 16-value sub-blocks) of a Q3_K super-block for matmul_vec: raw loads (two
//                words of 2-bit quants, the hmask word, the packed scales, d), vals = sc·q with q in -4..=3
// Layout         repacked: qs 2 words per 32 values from word 0 (2-bit planes) | hmask one word per 32 values at word
//                info.qh (bit j: value j; repack.rs) | scales 3 words per 256 values at info.sc | d f16 pairs at info.d
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: |sc·q| ≤ 128; the f16 d is applied per block by the caller

const HAS_MIN: bool = false;
const MIN_HALVES: bool = false;

struct Raw { q: vec2<u32>, h: u32, sc: vec2<f32>, d: f32, m: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let v = w[blk >> 1u];
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let packed = vec3<u32>(word(s), word(s + 1u), word(s + 2u));
    let j = 2u * (blk & 7u);
    let sc = vec2<f32>(scale_q3_k(packed, j), scale_q3_k(packed, j + 1u));
    return Raw(select(v.xy, v.zw, (blk & 1u) == 1u), word(info.qh + blk), sc, half_of(info.d, sb), 0.0, 0.0);
}

// Values 4i .. 4i+3 of a 16-value half: its word `q`, the block's high bits from bit j = 4i (+ 16).
fn q3k4(q: u32, i: u32, h: u32, j: u32) -> vec4<f32> {
    return vec4<f32>(crumbs4(q, 2u * i) | (bits4(h, j) << vec4<u32>(2u))) - 4.0;
}

fn vals(r: Raw) -> Blk {
    let a = r.sc.x;
    let b = r.sc.y;
    return Blk(q3k4(r.q.x, 0u, r.h, 0u) * a, q3k4(r.q.x, 1u, r.h, 4u) * a,
               q3k4(r.q.x, 2u, r.h, 8u) * a, q3k4(r.q.x, 3u, r.h, 12u) * a,
               q3k4(r.q.y, 0u, r.h, 16u) * b, q3k4(r.q.y, 1u, r.h, 20u) * b,
               q3k4(r.q.y, 2u, r.h, 24u) * b, q3k4(r.q.y, 3u, r.h, 28u) * b);
}
