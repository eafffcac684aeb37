// decode32_int4  one 32-value run of an INT4 group for matmul_vec: raw loads (one vec4 of quants, the group's header),
//                vals = q; d and m = -(d·z) of the group (32 << INTN_SHIFT values)
// Layout         repacked: qs [n_blocks] vec4<u32> (16 bytes per 32 values, as Q4_0; repack.rs) | one header word per
//                group at word info.d: f16 d | z << 16; quads as decode32_q4_0
// Launch         none (joined into matmul_vec, after intn.wgsl); raw's blk counts 32-value runs
// Numerics       exact: small integers; x = d·q - d·z (d·z exact in f32) is applied per run by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;
// The int8 GEMV's values: byte + INT_OFF (gemv_xq8.wgsl).
const INT_OFF: f32 = 0.0;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let dz = intn_dz(word(info.d + (blk >> INTN_SHIFT)));
    return Raw(wload(blk), dz.x, -(dz.x * dz.y), 0.0, 0.0);
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
