// tile32_f16  matmul_tiled's K step with SHADER_F16: acc[i, j] += f32(Σ_kk f16(x[i, kk]) · f16(w[j, kk])), f16 fma chain
// Layout      slabs of vec4<f16> quads (half matmul_tiled's f32 workgroup memory and load traffic); the partial
//             products of one step (one quant block) in f16 registers, then added to the f32 tile
// Launch      none (joined into matmul_tiled after `enable f16;`, quantized weights only: float weights keep f32)
// Numerics    x and the decoded weights rounded to f16, then a 32-term f16 fma chain per output and block (at most
//             34 roundings of 2^-11 relative to Σ|x·w| over the block); f32 across blocks, so error does not grow with k

alias T = f16;

fn tile_step(tx: u32, ty: u32) {
    var part: array<vec4<f16>, 4u * TMQ * TNQ>;
    for (var kk = 0u; kk < 32u; kk++) {
        var xq: array<vec4<f16>, TMQ>;
        var wq: array<vec4<f16>, TNQ>;
        for (var a = 0u; a < TMQ; a++) {
            xq[a] = xs[kk * (BM / 4u) + ty + 16u * a];
        }
        for (var b = 0u; b < TNQ; b++) {
            wq[b] = ws[kk * (BN / 4u) + tx + 16u * b];
        }
        for (var a = 0u; a < TMQ; a++) {
            for (var r = 0u; r < 4u; r++) {
                for (var b = 0u; b < TNQ; b++) {
                    let q = (4u * a + r) * TNQ + b;
                    part[q] = fma(vec4<f16>(xq[a][r]), wq[b], part[q]);
                }
            }
        }
    }
    for (var q = 0u; q < 4u * TMQ * TNQ; q++) {
        acc[q] += vec4<f32>(part[q]);
    }
}
