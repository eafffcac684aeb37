// decode_q4_1  values 8g .. 8g+7 of row `row`: x = q·d + m; nibble order as Q4_0
// Layout       repacked: qs [n_blocks · 4] words | (d, m) f16 pair per block, one word each, at info.d
// Launch       none (joined into matmul / matmul_tiled / embed)
// Numerics     exact up to f32 rounding of q·d + m (as ggml)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let dm = unpack2x16float(w[info.d + blk]);
    let a = vec4<f32>(nibbles4(w[q], shift));
    let b = vec4<f32>(nibbles4(w[q + 1u], shift));
    return Vals8(a * dm.x + dm.y, b * dm.x + dm.y);
}
