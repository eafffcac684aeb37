// decode_f32  values k·8g .. 8g+7 of row `row`: w[row·k + i] as f32 bits; zero past k
// Layout      w: the GGUF bytes as u32 words, row-major [n, k]
// Launch      none (joined into matmul / matmul_tiled / embed)
// Numerics    exact

fn decode8(info: WeightInfo, row: u32, g: u32) -> Vals8 {
    let base = row * info.k + g * 8u;
    var v: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        v[i] = select(0.0, bitcast<f32>(w[base + i]), g * 8u + i < info.k);
    }
    return Vals8(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
}
