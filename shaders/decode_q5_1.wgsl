// decode_q5_1  values 8g .. 8g+7 of row `row`: x = q·d + m, q = nibble | bit j of qh << 4
// Layout       repacked: qs [n_blocks · 4] words | qh [n_blocks] words at info.qh | (d, m) word per block at info.d
// Launch       none (joined into matmul / matmul_tiled / embed)
// Numerics     exact up to f32 rounding of q·d + m (as ggml)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let h = w[info.qh + blk] >> (gi * 8u);
    let ha = ((vec4<u32>(h) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) << vec4<u32>(4u);
    let hb = ((vec4<u32>(h) >> vec4<u32>(4u, 5u, 6u, 7u)) & vec4<u32>(1u)) << vec4<u32>(4u);
    let dm = unpack2x16float(w[info.d + blk]);
    let a = vec4<f32>(nibbles4(w[q], shift) | ha);
    let b = vec4<f32>(nibbles4(w[q + 1u], shift) | hb);
    return Vals8(a * dm.x + dm.y, b * dm.x + dm.y);
}
