// decode32_int2  one 32-value run of an INT2 group for matmul_vec: raw loads (two words of 2-bit quants, the group's
//                header), vals = q; d and m = -(d·z) of the group (32 << INTN_SHIFT values)
// Layout         repacked: qs 2 words per 32 values from word 0 (the k-quants' 2-bit planes; repack.rs) | one header
//                word per group at word info.d: f16 d | z << 16
// Launch         none (joined into matmul_vec, after kquant.wgsl and intn.wgsl); raw's blk counts 32-value runs
// Numerics       exact: small integers; x = d·q - d·z is applied per run by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;

struct Raw { q: vec2<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let v = wload(blk >> 1u);
    let dz = intn_dz(word(info.d + (blk >> INTN_SHIFT)));
    return Raw(select(v.xy, v.zw, (blk & 1u) == 1u), dz.x, -(dz.x * dz.y), 0.0, 0.0);
}

fn vals(r: Raw) -> Blk {
    return Blk(vec4<f32>(crumbs4(r.q.x, 0u)), vec4<f32>(crumbs4(r.q.x, 2u)),
               vec4<f32>(crumbs4(r.q.x, 4u)), vec4<f32>(crumbs4(r.q.x, 6u)),
               vec4<f32>(crumbs4(r.q.y, 0u)), vec4<f32>(crumbs4(r.q.y, 2u)),
               vec4<f32>(crumbs4(r.q.y, 4u)), vec4<f32>(crumbs4(r.q.y, 6u)));
}
