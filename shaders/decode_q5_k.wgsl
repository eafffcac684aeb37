// decode_q5_k  values 8g .. 8g+7 of row `row`: x = (d·sc)·q - (dmin·m), q = nibble | fifth bit << 4; nibbles, scales
//              and mins as decode_q4_k, bit j of the sub-block's qh word is value j's fifth bit
// Layout       repacked: qs [n_blocks · 4] words | qh [n_blocks] words at info.qh (repack.rs) | scales 12 bytes per
//              256 values at info.sc (as GGUF) | (d, dmin) f16 pair per 256 values, one word each, at info.d
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl)
// Numerics     exact as ggml's dequantize_row_q5_K: (d·sc)·q is exact in f32, one rounding in the difference

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let h = w[info.qh + blk] >> (gi * 8u);
    let sb = blk >> 3u;
    let s = info.sc + 3u * sb;
    let sm = vec2<f32>(scale_min_k4(vec3<u32>(w[s], w[s + 1u], w[s + 2u]), blk & 7u));
    let dm = unpack2x16float(w[info.d + sb]);
    let dl = dm.x * sm.x;
    let ml = dm.y * sm.y;
    let a = vec4<f32>(nibbles4(w[q], shift) | (bits4(h, 0u) << vec4<u32>(4u)));
    let b = vec4<f32>(nibbles4(w[q + 1u], shift) | (bits4(h, 4u) << vec4<u32>(4u)));
    return Vals8(a * dl - ml, b * dl - ml);
}
