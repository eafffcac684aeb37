// decode_q4_0  values 8g .. 8g+7 of row `row`: x = (q - 8)·d; value j of a block is the low nibble of
//              byte j (j < 16) or the high nibble of byte j - 16
// Layout       repacked: qs [n_blocks · 4] words (16 bytes per block) | d [n_blocks / 2] f16 pairs at info.d
// Launch       none (joined into matmul / matmul_tiled / embed)
// Numerics     exact (f16 scale to f32)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let d = half_at(info.d, blk);
    let a = vec4<f32>(nibbles4(w[q], shift)) - 8.0;
    let b = vec4<f32>(nibbles4(w[q + 1u], shift)) - 8.0;
    return Vals8(a * d, b * d);
}
