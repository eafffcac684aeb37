// tile32_f32  matmul_tiled's K step in f32: acc[i, j] = fma(xs[kk, i], ws[kk, j], acc[i, j]) for kk = 0 .. 31
// Layout      slabs of vec4<f32> quads (matmul_tiled.wgsl); each kk: TMQ row quads, TNQ column quads, outer product
// Launch      none (joined into matmul_tiled for float weights, and for quantized ones without SHADER_F16)
// Numerics    exact f32 products; per output one fma chain over k in order (zeros past k add nothing)

alias T = f32;

fn tile_step(tx: u32, ty: u32) {
    for (var kk = 0u; kk < 32u; kk++) {
        var xq: array<vec4<f32>, TMQ>;
        var wq: array<vec4<f32>, TNQ>;
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
                    acc[q] = fma(vec4<f32>(xq[a][r]), wq[b], acc[q]);
                }
            }
        }
    }
}
