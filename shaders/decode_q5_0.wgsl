// decode_q5_0  values 8g .. 8g+7 of row `row`: x = (q - 16)·d, q = nibble | bit j of qh << 4
// Layout       repacked: qs [n_blocks · 4] words | qh [n_blocks] words at info.qh | d f16 pairs at info.d
// Launch       none (joined into matmul / matmul_tiled / embed)
// Numerics     exact (f16 scale to f32)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let h = w[info.qh + blk] >> (gi * 8u);
    let ha = ((vec4<u32>(h) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) << vec4<u32>(4u);
    let hb = ((vec4<u32>(h) >> vec4<u32>(4u, 5u, 6u, 7u)) & vec4<u32>(1u)) << vec4<u32>(4u);
    let d = half_at(info.d, blk);
    let a = vec4<f32>(nibbles4(w[q], shift) | ha) - 16.0;
    let b = vec4<f32>(nibbles4(w[q + 1u], shift) | hb) - 16.0;
    return Vals8(a * d, b * d);
}
