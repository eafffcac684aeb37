// decode_nf4_dq  values 8g .. 8g+7 of row `row`: x = (D·c_j)·NF4[q] for group j (0, 1) of the value's block of two groups
//                (a block is 32 << INTN_SHIFT values); codes in 32-value runs in Q4_0's nibble order, as decode_int4
// Layout         repacked: qs [n_blocks · 4] words (16 bytes per 32 values; repack.rs) | one header word per block
//                at info.d: f16 D | c0 << 16 | c1 << 24; levels at info.sc
// Launch         none (joined into matmul / matmul_tiled / embed, after intn.wgsl)
// Numerics       exact as the reference: D·c_j is exact in f32, then one product per value

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let h = w[info.d + (blk >> INTN_SHIFT)];
    let c = (h >> (16u + 8u * ((blk >> (INTN_SHIFT - 1u)) & 1u))) & 0xffu;
    let scale = unpack2x16float(h).x * f32(c);
    return Vals8(nf4x4(info.sc, nibbles4(w[q], shift)) * scale, nf4x4(info.sc, nibbles4(w[q + 1u], shift)) * scale);
}
