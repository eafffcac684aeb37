// decode_q8_0  values 8g .. 8g+7 of row `row`: x = q·d, q a signed byte
// Layout       repacked: qs [n_blocks · 8] words (32 bytes per block) | d [n_blocks / 2] f16 pairs at info.d
// Launch       none (joined into matmul / matmul_tiled / embed)
// Numerics     exact (f16 scale to f32)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let q = blk * 8u + (g & 3u) * 2u;
    let d = half_at(info.d, blk);
    return Vals8(sbytes4(w[q]) * d, sbytes4(w[q + 1u]) * d);
}
