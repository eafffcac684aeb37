// tile32_f16  matmul_tiled's arithmetic with SHADER_F16 for one block: t[r, c] += f32(Σ_kk f16(x[r, kk]) · f16(w[c, kk])),
//             the sum an f16 fma chain over kk = kk0 .. kk0+31
// Layout      slabs of vec4<f16> quads (half matmul_tiled's f32 workgroup memory and load traffic); the block's
//             partial products in the f16 fields of Part (packed f16x2 fmas on NVIDIA, the row value a broadcast
//             half), then added to the f32 tile
// Launch      none (joined into matmul_tiled after `enable f16;`, quantized weights only: float weights keep f32)
// Numerics    x and the decoded weights rounded to f16, then a 32-term f16 fma chain per output and block (at most
//             34 roundings of 2^-11 relative to Σ|x·w| over the block); f32 across blocks, so error does not grow with k

alias T = f16;

struct Part {
    a0: vec4<f16>, a1: vec4<f16>, a2: vec4<f16>, a3: vec4<f16>,
    b0: vec4<f16>, b1: vec4<f16>, b2: vec4<f16>, b3: vec4<f16>,
}

fn tile_block(t: Tile, kk0: u32, tx: u32, ty: u32) -> Tile {
    let z = vec4<f16>();
    var p = Part(z, z, z, z, z, z, z, z);
    for (var kk = kk0; kk < kk0 + 32u; kk++) {
        let xq = xs[kk * BMQ + ty];
        let wa = ws[kk * BNQ + tx];
        p.a0 = fma(vec4<f16>(xq.x), wa, p.a0);
        p.a1 = fma(vec4<f16>(xq.y), wa, p.a1);
        p.a2 = fma(vec4<f16>(xq.z), wa, p.a2);
        p.a3 = fma(vec4<f16>(xq.w), wa, p.a3);
        if (WIDE) {
            let wb = ws[kk * BNQ + 16u + tx];
            p.b0 = fma(vec4<f16>(xq.x), wb, p.b0);
            p.b1 = fma(vec4<f16>(xq.y), wb, p.b1);
            p.b2 = fma(vec4<f16>(xq.z), wb, p.b2);
            p.b3 = fma(vec4<f16>(xq.w), wb, p.b3);
        }
    }
    return Tile(t.a0 + vec4<f32>(p.a0), t.a1 + vec4<f32>(p.a1), t.a2 + vec4<f32>(p.a2), t.a3 + vec4<f32>(p.a3),
                t.b0 + vec4<f32>(p.b0), t.b1 + vec4<f32>(p.b1), t.b2 + vec4<f32>(p.b2), t.b3 + vec4<f32>(p.b3));
}
