// decode32_q8_0  one whole Q8_0 block for matmul_vec: raw loads (two vec4 of quants, one scale), vals = q
// Layout         repacked: qs [2 · n_blocks] vec4<u32> (32 bytes per block) | d f16 pairs at word info.d
// Launch         none (joined into matmul_vec); quad i is the signed bytes of word i
// Numerics       exact: small integers; the f16 scale is applied per block by the caller

const HAS_MIN: bool = false;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = 0.0;

struct Raw { q: vec4<u32>, q2: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    return Raw(wload(2u * blk), wload(2u * blk + 1u), half_of(info.d, blk), 0.0, 0.0, 0.0);
}

fn vals(r: Raw) -> Blk {
    return Blk(sbyte4(r.q.x), sbyte4(r.q.y), sbyte4(r.q.z), sbyte4(r.q.w),
               sbyte4(r.q2.x), sbyte4(r.q2.y), sbyte4(r.q2.z), sbyte4(r.q2.w));
}

fn ints(r: Raw) -> Ints {
    return Ints(r.q, r.q2);
}
