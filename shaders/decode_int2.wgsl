// decode_int2  values 8g .. 8g+7 of row `row`: x = d·(q - z), q in 0..=3, (d, z) of the value's group (32 << INTN_SHIFT
//              values); each 32-value run two words of 16, value l of a word at byte l % 4, bits 2·(l / 4)
// Layout       repacked: qs [n_blocks · 2] words (8 bytes per 32 values: the k-quants' 2-bit planes; repack.rs) | one
//              header word per group at info.d: f16 d | z << 16
// Launch       none (joined into matmul / matmul_tiled / embed, after kquant.wgsl and intn.wgsl)
// Numerics     exact as the reference: d·(q - z) is one exact f32 product

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let blk = row * info.blocks + (g >> 2u);
    let gi = g & 3u;
    // Values 8gi .. 8gi+7: quads 2gi and 2gi + 1, in word gi / 2 of the run.
    let q = w[2u * blk + (gi >> 1u)];
    let shift = 4u * (gi & 1u);
    let dz = intn_dz(w[info.d + (blk >> INTN_SHIFT)]);
    let a = (vec4<f32>(crumbs4(q, shift)) - dz.y) * dz.x;
    let b = (vec4<f32>(crumbs4(q, shift + 2u)) - dz.y) * dz.x;
    return Vals8(a, b);
}
