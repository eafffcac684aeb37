// decode32_nf4_dq  one 32-value run of an NF4_DQ block for matmul_vec: raw loads (one vec4 of codes, the block's
//                  header), vals = NF4[q]; d = D·c_j of the run's group j (a block is two groups, 32 << INTN_SHIFT values)
// Layout           repacked: qs [n_blocks] vec4<u32> (16 bytes per 32 values, as Q4_0; repack.rs) | one header word
//                  per block at word info.d: f16 D | c0 << 16 | c1 << 24; level pairs after info.sc (nf4_pairs.wgsl)
// Launch           none (joined into matmul_vec, after intn.wgsl); raw's blk counts 32-value runs
// Numerics         D·c_j is exact in f32; each product level·x rounds once

const HAS_MIN: bool = false;
const HALVES: bool = false;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32, lv: u32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    let h = word(info.d + (blk >> INTN_SHIFT));
    let c = (h >> (16u + 8u * ((blk >> (INTN_SHIFT - 1u)) & 1u))) & 0xffu;
    return Raw(wload(blk), unpack2x16float(h).x * f32(c), 0.0, 0.0, 0.0, (info.sc >> 2u) + 4u);
}

fn vals(r: Raw) -> Blk {
    return nf4_vals(r.lv, r.q);
}
