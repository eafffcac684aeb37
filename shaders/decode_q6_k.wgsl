// decode_q6_k  values 8g .. 8g+7 of row `row`: x = (d·sc)·(q - 32), q = nibble | 2 high bits << 4, the signed 8-bit
//              sc of the value's 16-value sub-block; nibbles as Q4_0 blocks, high bits as 2-bit planes
// Layout       repacked: ql [n_blocks · 4] words | qh [n_blocks · 2] words at info.qh (repack.rs) | scales 16 signed
//              bytes per 256 values at info.sc (as GGUF) | d f16 pairs at info.d
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl)
// Numerics     exact as ggml's dequantize_row_q6_K ((d·sc)·(q - 32) is exact in f32)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let h = w[info.qh + 2u * blk + (gi >> 1u)];
    let hs = 4u * (gi & 1u);
    let sc = sbyte_pair(w[info.sc + (blk >> 1u)], blk & 1u)[gi >> 1u];
    let dl = half_at(info.d, blk >> 3u) * sc;
    let a = vec4<f32>(nibbles4(w[q], shift) | (crumbs4(h, hs) << vec4<u32>(4u))) - 32.0;
    let b = vec4<f32>(nibbles4(w[q + 1u], shift) | (crumbs4(h, hs + 2u) << vec4<u32>(4u))) - 32.0;
    return Vals8(a * dl, b * dl);
}
