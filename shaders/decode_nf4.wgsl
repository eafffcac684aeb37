// decode_nf4  values 8g .. 8g+7 of row `row`: x = absmax·NF4[q], absmax of the value's group (32 << INTN_SHIFT values);
//             codes in 32-value runs in Q4_0's nibble order, as decode_int4
// Layout      repacked: qs [n_blocks · 4] words (16 bytes per 32 values; repack.rs) | one header word per group at
//             info.d: f16 absmax in the low half | the 16 levels (f32 bits) at info.sc
// Launch      none (joined into matmul / matmul_tiled / embed, after intn.wgsl)
// Numerics    exact as the reference: one f32 product per value

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let absmax = unpack2x16float(w[info.d + (blk >> INTN_SHIFT)]).x;
    return Vals8(nf4x4(info.sc, nibbles4(w[q], shift)) * absmax, nf4x4(info.sc, nibbles4(w[q + 1u], shift)) * absmax);
}
