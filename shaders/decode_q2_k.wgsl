// decode_q2_k  values 8g .. 8g+7 of row `row`: x = (d·sc)·q - (dmin·m), q in 0..=3, the 4-bit (sc, m) of the value's
//              16-value sub-block (scale in the low nibble of its byte)
// Layout       repacked: qs [n_blocks · 2] words (8 bytes per 32 values: 2-bit planes, repack.rs) | scales 16 bytes
//              per 256 values at info.sc (as GGUF) | (d, dmin) f16 pair per 256 values, one word each, at info.d
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl)
// Numerics     exact as ggml's dequantize_row_q2_K: (d·sc)·q is exact in f32, one rounding in the difference

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    // Values 8gi .. 8gi+7: quads 2gi and 2gi + 1, in word gi / 2 of the block; sub-block 2·(blk % 8) + gi / 2.
    let q = w[2u * blk + (gi >> 1u)];
    let shift = 4u * (gi & 1u);
    let sub = byte_pair(w[info.sc + (blk >> 1u)], blk & 1u)[gi >> 1u];
    let dm = unpack2x16float(w[info.d + (blk >> 3u)]);
    let dl = dm.x * f32(sub & 0xfu);
    let ml = dm.y * f32(sub >> 4u);
    let a = vec4<f32>(crumbs4(q, shift));
    let b = vec4<f32>(crumbs4(q, shift + 2u));
    return Vals8(a * dl - ml, b * dl - ml);
}
