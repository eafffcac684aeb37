// decode_int4  values 8g .. 8g+7 of row `row`: x = d·(q - z), (d, z) of the value's group (32 << INTN_SHIFT values); each
//              32-value run in Q4_0's nibble order (value j the low nibble of byte j, j < 16, else the high of j - 16)
// Layout       repacked: qs [n_blocks · 4] words (16 bytes per 32 values; repack.rs) | one header word per group at
//              info.d: f16 d | z << 16 (GGUF's header bytes)
// Launch       none (joined into matmul / matmul_tiled / embed, after intn.wgsl)
// Numerics     exact as the reference: d·(q - z) is one exact f32 product (an 11-bit d times a 5-bit integer)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    let q = blk * 4u + (gi & 1u) * 2u;
    let shift = (gi >> 1u) * 4u;
    let dz = intn_dz(w[info.d + (blk >> INTN_SHIFT)]);
    let a = (vec4<f32>(nibbles4(w[q], shift)) - dz.y) * dz.x;
    let b = (vec4<f32>(nibbles4(w[q + 1u], shift)) - dz.y) * dz.x;
    return Vals8(a, b);
}
