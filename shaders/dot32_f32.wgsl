// dot32_f32  matmul_vec's per-block products in f32: block_fma(d, w0..w3, x) = fma(d, (w_r·x)_r, acc)
// Layout     Blk: 32 values as 8 vec4 quads (matmul_vec.wgsl); d: the four rows' block scales
// Launch     none (joined into matmul_vec)
// Numerics   per row a vec4 fma chain over the 8 quads, then (s.x + s.y) + (s.z + s.w); scaled by d in f32

// Σ a·b over a block: a vec4 fma chain, then a fixed pairwise sum of its lanes.
fn dot32(a: Blk, b: Blk) -> f32 {
    var s = a.v0 * b.v0;
    s = fma(a.v1, b.v1, s);
    s = fma(a.v2, b.v2, s);
    s = fma(a.v3, b.v3, s);
    s = fma(a.v4, b.v4, s);
    s = fma(a.v5, b.v5, s);
    s = fma(a.v6, b.v6, s);
    s = fma(a.v7, b.v7, s);
    return (s.x + s.y) + (s.z + s.w);
}

fn block_fma(d: vec4<f32>, w0: Blk, w1: Blk, w2: Blk, w3: Blk, xb: Blk, acc: vec4<f32>) -> vec4<f32> {
    return fma(d, vec4<f32>(dot32(w0, xb), dot32(w1, xb), dot32(w2, xb), dot32(w3, xb)), acc);
}
