// tile32_f32  matmul_tiled's arithmetic in f32 for one block: t[r, c] = fma(x[r, kk], w[c, kk], t[r, c]), kk = kk0 .. kk0+31
// Layout      slabs of vec4<f32> quads (matmul_tiled.wgsl); per kk one row quad and one (two) column quads, outer product
// Launch      none (joined into matmul_tiled for float weights, and for quantized ones without SHADER_F16)
// Numerics    exact f32 products; per output one fma chain over k in order (zeros past k add nothing)

alias T = f32;

fn tile_block(t: Tile, kk0: u32, tx: u32, ty: u32) -> Tile {
    var r = t;
    for (var kk = kk0; kk < kk0 + 32u; kk++) {
        let xq = xs[kk * BMQ + ty];
        let wa = ws[kk * BNQ + tx];
        r.a0 = fma(vec4<f32>(xq.x), wa, r.a0);
        r.a1 = fma(vec4<f32>(xq.y), wa, r.a1);
        r.a2 = fma(vec4<f32>(xq.z), wa, r.a2);
        r.a3 = fma(vec4<f32>(xq.w), wa, r.a3);
        if (WIDE) {
            let wb = ws[kk * BNQ + 16u + tx];
            r.b0 = fma(vec4<f32>(xq.x), wb, r.b0);
            r.b1 = fma(vec4<f32>(xq.y), wb, r.b1);
            r.b2 = fma(vec4<f32>(xq.z), wb, r.b2);
            r.b3 = fma(vec4<f32>(xq.w), wb, r.b3);
        }
    }
    return r;
}
