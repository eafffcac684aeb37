// decode32_nf4  one 32-value run of an NF4 group for matmul_vec: raw loads (one vec4 of codes, the group's absmax),
//               vals = NF4[q]; d = absmax of the group (32 << INTN_SHIFT values)
// Layout        repacked: qs [n_blocks] vec4<u32> (16 bytes per 32 values, as Q4_0; repack.rs) | one header word per
//               group at word info.d: f16 absmax in the low half; quads as decode32_q4_0; level pairs after info.sc
// Launch        none (joined into matmul_vec, after intn.wgsl); raw's blk counts 32-value runs
// Numerics      the levels are f32 constants, so each product level·x rounds once (as the CPU's dequantize-then-dot)

const HAS_MIN: bool = false;
const HALVES: bool = false;

struct Raw { q: vec4<u32>, d: f32, m: f32, d2: f32, m2: f32, lv: u32 }

fn raw(info: WeightInfo, blk: u32) -> Raw {
    return Raw(wload(blk), unpack2x16float(word(info.d + (blk >> INTN_SHIFT))).x, 0.0, 0.0, 0.0, (info.sc >> 2u) + 4u);
}

fn vals(r: Raw) -> Blk {
    return nf4_vals(r.lv, r.q);
}
