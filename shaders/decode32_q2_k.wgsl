// decode32_q2_k  one 32-value block (two 16-value sub-blocks) of a Q2_K super-block for matmul_vec: raw loads (two
//                words of 2-bit quants, the sub-blocks' scale bytes, (d, dmin)), vals = q; per half d·sc and -(dmin·m)
// Layout         repacked: qs 2 words per 32 values from word 0 (2-bit planes; repack.rs) | scales 4 words per 256
//                values at word info.sc (byte j: sc | m << 4 of sub-block j) | (d, dmin) one word per 256 values at info.d
// Launch         none (joined into matmul_vec, after kquant.wgsl); raw's blk counts 32-value blocks, 8 per super-block
// Numerics       exact: small integers; x = (d·sc)·q - dmin·m is applied per half by the caller (HALVES, HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = true;

struct Raw { q: vec2<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let v = wload(blk >> 1u);
    let sub = byte_pair(word(info.sc + (blk >> 1u)), blk & 1u);
    let dm = unpack2x16float(word(info.d + (blk >> 3u)));
    let d = dm.x * vec2<f32>(sub & vec2<u32>(0xfu));
    let m = -(dm.y * vec2<f32>(sub >> vec2<u32>(4u)));
    return Raw(select(v.xy, v.zw, (blk & 1u) == 1u), d.x, m.x, d.y, m.y);
}

fn vals(r: Raw) -> Blk {
    return Blk(vec4<f32>(crumbs4(r.q.x, 0u)), vec4<f32>(crumbs4(r.q.x, 2u)),
               vec4<f32>(crumbs4(r.q.x, 4u)), vec4<f32>(crumbs4(r.q.x, 6u)),
               vec4<f32>(crumbs4(r.q.y, 0u)), vec4<f32>(crumbs4(r.q.y, 2u)),
               vec4<f32>(crumbs4(r.q.y, 4u)), vec4<f32>(crumbs4(r.q.y, 6u)));
}
