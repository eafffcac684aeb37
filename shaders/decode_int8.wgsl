// decode_int8  values 8g .. 8g+7 of row `row`: x = d·(q - z), q and z unsigned bytes, (d, z) of the value's group
//              (32 << INTN_SHIFT values)
// Layout       repacked: qs [n_blocks · 8] words (the values' bytes in order, as GGUF) | one header word per group at
//              info.d: f16 d | z << 16
// Launch       none (joined into matmul / matmul_tiled / embed, after intn.wgsl)
// Numerics     exact as the reference: q - z is exact in f32 and d·(q - z) one exact product (11 by 9 bits)

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let q = blk * 8u + (g & 3u) * 2u;
    let dz = intn_dz(w[info.d + (blk >> INTN_SHIFT)]);
    return Vals8((ubytes4(w[q]) - dz.y) * dz.x, (ubytes4(w[q + 1u]) - dz.y) * dz.x);
}
