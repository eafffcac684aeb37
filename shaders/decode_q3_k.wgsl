// decode_q3_k  values 8g .. 8g+7 of row `row`: x = (d·sc)·q, q = low 2 bits - 4 where the high bit is clear, the
//              signed 6-bit sc of the value's 16-value sub-block
// Layout       repacked: qs [n_blocks · 2] words (2-bit planes) | hmask [n_blocks] words at info.qh (bit j: value j;
//              repack.rs) | scales 12 bytes per 256 values at info.sc (as GGUF) | d f16 pairs at info.d
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl)
// Numerics     exact as ggml's dequantize_row_q3_K ((d·sc)·q is exact in f32)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = w[2u * blk + (gi >> 1u)];
    let shift = 4u * (gi & 1u);
    let h = w[info.qh + blk] >> (gi * 8u);
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let sc = scale_q3_k(vec3<u32>(w[s], w[s + 1u], w[s + 2u]), 2u * (blk & 7u) + (gi >> 1u));
    let dl = half_at(info.d, sb) * sc;
    let a = vec4<f32>(crumbs4(q, shift) | (bits4(h, 0u) << vec4<u32>(2u))) - 4.0;
    let b = vec4<f32>(crumbs4(q, shift + 2u) | (bits4(h, 4u) << vec4<u32>(2u))) - 4.0;
    return Vals8(a * dl, b * dl);
}
