// decode32_int8  one 32-value run of an INT8 group for matmul_vec: raw loads (two vec4 of quants, the group's header),
//                vals = q (unsigned bytes); d and m = -(d·z) of the group (32 << INTN_SHIFT values)
// Layout         repacked: qs [2 · n_blocks] vec4<u32> (32 bytes per 32 values, in order) | one header word per group
//                at word info.d: f16 d | z << 16
// Launch         none (joined into matmul_vec, after intn.wgsl); quad i is the bytes of word i
// Numerics       exact: integers below 256; x = d·q - d·z (d·z exact in f32) is applied per run by the caller (HAS_MIN)

const HAS_MIN: bool = true;
const HALVES: bool = false;

struct Raw { q: vec4<u32>, q2: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let dz = intn_dz(word(info.d + (blk >> INTN_SHIFT)));
    return Raw(wload(2u * blk), wload(2u * blk + 1u), dz.x, -(dz.x * dz.y), 0.0, 0.0);
}

fn vals(r: Raw) -> Blk {
    return Blk(ubytes4(r.q.x), ubytes4(r.q.y), ubytes4(r.q.z), ubytes4(r.q.w),
               ubytes4(r.q2.x), ubytes4(r.q2.y), ubytes4(r.q2.z), ubytes4(r.q2.w));
}
