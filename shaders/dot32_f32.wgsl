// dot32_f32  matmul_vec's per-block products in f32: block_fma(d, w0..w3, x) = fma(d, (w_r·x)_r, acc)
// Layout     Blk: 32 values as 8 vec4 quads (matmul_vec.wgsl); d: the four rows' block scales
// Launch     none (joined into matmul_vec)
// Numerics   per row a vec4 fma chain over the 8 quads, then (s.x + s.y) + (s.z + s.w); scaled by d in f32
//            (block_fma2: a chain per 16-value half, each scaled by its own d)

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

// Σ a·b over each 16-value half of a block, as dot32 does the whole.
fn dot16x2(a: Blk, b: Blk) -> vec2<f32> {
    var lo = a.v0 * b.v0;
    lo = fma(a.v1, b.v1, lo);
    lo = fma(a.v2, b.v2, lo);
    lo = fma(a.v3, b.v3, lo);
    var hi = a.v4 * b.v4;
    hi = fma(a.v5, b.v5, hi);
    hi = fma(a.v6, b.v6, hi);
    hi = fma(a.v7, b.v7, hi);
    return vec2<f32>((lo.x + lo.y) + (lo.z + lo.w), (hi.x + hi.y) + (hi.z + hi.w));
}

// block_fma for blocks whose halves have their own scale: d for values 0..15, d2 for 16..31.
fn block_fma2(d: vec4<f32>, d2: vec4<f32>, w0: Blk, w1: Blk, w2: Blk, w3: Blk, xb: Blk, acc: vec4<f32>) -> vec4<f32> {
    let s0 = dot16x2(w0, xb);
    let s1 = dot16x2(w1, xb);
    let s2 = dot16x2(w2, xb);
    let s3 = dot16x2(w3, xb);
    return fma(d2, vec4<f32>(s0.y, s1.y, s2.y, s3.y), fma(d, vec4<f32>(s0.x, s1.x, s2.x, s3.x), acc));
}
