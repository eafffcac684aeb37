// dot32_f16  matmul_vec's per-block products in f16 (SHADER_F16): block_fma = acc + (Σ f16(d·q) · f16(x))_r
// Layout     Blk: 32 values as 8 vec4 quads (matmul_vec.wgsl); x is rounded to f16 once per block and row
// Launch     none (joined into matmul_vec after `enable f16;` when the adapter has SHADER_F16)
// Numerics   weights dequantized to f16 (d·q, so |w| stays small and products cannot overflow for |x| < 65504),
//            products and the 8-step vec4 fma chain in f16, then f32: lane sum (s.x + s.y) + (s.z + s.w) and
//            the accumulation across blocks; error ~ a few f16 ulps per block, not growing with k

struct Blk16 { v0: vec4<f16>, v1: vec4<f16>, v2: vec4<f16>, v3: vec4<f16>,
               v4: vec4<f16>, v5: vec4<f16>, v6: vec4<f16>, v7: vec4<f16> }

fn half_blk(b: Blk) -> Blk16 {
    return Blk16(vec4<f16>(b.v0), vec4<f16>(b.v1), vec4<f16>(b.v2), vec4<f16>(b.v3),
                 vec4<f16>(b.v4), vec4<f16>(b.v5), vec4<f16>(b.v6), vec4<f16>(b.v7));
}

// d · Σ a·b over a block, the weights a dequantized to f16 first.
fn dot16(d: f32, a: Blk, b: Blk16) -> f32 {
    let h = f16(d);
    var s = (vec4<f16>(a.v0) * h) * b.v0;
    s = fma(vec4<f16>(a.v1) * h, b.v1, s);
    s = fma(vec4<f16>(a.v2) * h, b.v2, s);
    s = fma(vec4<f16>(a.v3) * h, b.v3, s);
    s = fma(vec4<f16>(a.v4) * h, b.v4, s);
    s = fma(vec4<f16>(a.v5) * h, b.v5, s);
    s = fma(vec4<f16>(a.v6) * h, b.v6, s);
    s = fma(vec4<f16>(a.v7) * h, b.v7, s);
    let t = vec4<f32>(s);
    return (t.x + t.y) + (t.z + t.w);
}

fn block_fma(d: vec4<f32>, w0: Blk, w1: Blk, w2: Blk, w3: Blk, xb: Blk, acc: vec4<f32>) -> vec4<f32> {
    let x16 = half_blk(xb);
    return acc + vec4<f32>(dot16(d.x, w0, x16), dot16(d.y, w1, x16), dot16(d.z, w2, x16), dot16(d.w, w3, x16));
}
