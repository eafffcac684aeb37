// decode32_q6_k  one 32-value block (two 16-value sub-blocks) of a Q6_K super-block for matmul_vec: raw loads (one vec4
//                of low nibbles, two words of high bits, the two signed scales, d), vals = q - 32; per half d·sc
// Layout         repacked: ql [n_blocks] vec4<u32> (as Q4_0) | qh 2 words per 32 values at word info.qh (2-bit planes;
//                repack.rs) | scales 4 words per 256 values at info.sc (signed bytes) | d f16 pairs at info.d
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: small integers; x = (d·sc)·(q - 32) is applied per half by the caller (HALVES)

const HAS_MIN: bool = false;
const HALVES: bool = true;

struct Raw { q: vec4<u32>, qh: vec2<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let qh = vec2<u32>(word(info.qh + 2u * blk), word(info.qh + 2u * blk + 1u));
    let d = half_of(info.d, blk >> 3u) * sbyte_pair(word(info.sc + (blk >> 1u)), blk & 1u);
    return Raw(wload(blk), qh, d.x, 0.0, d.y, 0.0);
}

// Values from the nibbles of word `q` (low or high by `shift`) and the 2-bit highs of word `h` at `hs`.
fn q6k4(q: u32, shift: u32, h: u32, hs: u32) -> vec4<f32> {
    return vec4<f32>(nib4(q, shift) | (crumbs4(h, hs) << vec4<u32>(4u))) - 32.0;
}

fn vals(r: Raw) -> Blk {
    return Blk(q6k4(r.q.x, 0u, r.qh.x, 0u), q6k4(r.q.y, 0u, r.qh.x, 2u),
               q6k4(r.q.z, 0u, r.qh.x, 4u), q6k4(r.q.w, 0u, r.qh.x, 6u),
               q6k4(r.q.x, 4u, r.qh.y, 0u), q6k4(r.q.y, 4u, r.qh.y, 2u),
               q6k4(r.q.z, 4u, r.qh.y, 4u), q6k4(r.q.w, 4u, r.qh.y, 6u));
}
