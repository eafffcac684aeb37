// decode_q4_k  values 8g .. 8g+7 of row `row`: x = (d·sc)·q - (dmin·m), the 6-bit (sc, m) of the value's 32-value
//              sub-block; sub-blocks as Q4_0 blocks (value j the low nibble of byte j, j < 16, else the high of j - 16)
// Layout       repacked: qs [n_blocks · 4] words (16 bytes per 32 values; repack.rs) | scales 12 bytes per 256 values
//              at info.sc (as GGUF) | (d, dmin) f16 pair per 256 values, one word each, at info.d
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl)
// Numerics     exact as ggml's dequantize_row_q4_K: (d·sc)·q is exact in f32, one rounding in the difference

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let sm = vec2<f32>(scale_min_k4(vec3<u32>(w[s], w[s + 1u], w[s + 2u]), blk & 7u));
    let dm = unpack2x16float(w[info.d + sb]);
    let dl = dm.x * sm.x;
    let ml = dm.y * sm.y;
    let a = vec4<f32>(nibbles4(w[q], shift));
    let b = vec4<f32>(nibbles4(w[q + 1u], shift));
    return Vals8(a * dl - ml, b * dl - ml);
}
