// decode_bf16  values 8g .. 8g+7 of row `row`: element e = row·k + i is half (e & 1) of word e / 2; zero past k
// Layout      w: the GGUF bytes (bfloat16 (upper half of an f32), little-endian pairs) as u32 words, zero-padded to a word
// Launch      none (joined into matmul / matmul_tiled / embed)
// Numerics    exact conversion to f32

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let base = row * info.k + g * 8u;
    var v: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let e = base + i;
        let word = w[e >> 1u];
        v[i] = select(0.0, bitcast<f32>(select(word << 16u, word & 0xffff0000u, (e & 1u) == 1u)), g * 8u + i < info.k);
    }
    return Vals8(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
}
