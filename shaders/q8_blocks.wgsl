// q8_blocks  how a kernel writes x's rows as int8 blocks for the int8 GEMV (gemv_xq8.wgsl): per 32 values
//            d = max|x| / 127, q = round(x / d) (four per word), and s = d · Σq, as llama.cpp's q8_1
// Layout     xq: u32 (declared by the kernel), block j = i · blocks + b of row i: quants at words 8j .. 8j+7
//            (value 4t + e in byte e of word t), then after all m · blocks blocks (d, s) as f32 bits at
//            words 8 · m · blocks + 2j, + 1
// Launch     none (joined into quantize_q8 and silu_mul_q8): one thread per vec4 of x, eight per block,
//            neighbouring lanes on neighbouring vec4s, 256-thread groups; every lane calls store_q8
// Numerics   q in -127 ..= 127 (d = 0 for an all-zero block gives q = 0); round() ties to even; the block's max
//            and Σq are exact whatever their order

var<workgroup> amax: array<f32, 256>;
var<workgroup> sums: array<i32, 256>;

// Writes vec4 g (of 8 · total) of x, whose values are v, as its block's quants; the block's first lane
// also writes (d, s). Lanes past the end (`inside` false) pass zeros and write nothing, but reach the barriers.
fn store_q8(v: vec4<f32>, g: u32, lane: u32, total: u32, inside: bool) {
    let a4 = abs(v);
    amax[lane] = max(max(a4.x, a4.y), max(a4.z, a4.w));
    workgroupBarrier();
    let first = lane & ~7u;
    var a = 0.0;
    for (var e = 0u; e < 8u; e++) {
        a = max(a, amax[first + e]);
    }
    let inv = select(0.0, 127.0 / a, a > 0.0);
    let q = vec4<i32>(round(v * inv));
    sums[lane] = (q.x + q.y) + (q.z + q.w);
    if (inside) {
        xq[g] = pack4xI8(q);
    }
    workgroupBarrier();
    if (inside && lane == first) {
        var s = 0;
        for (var e = 0u; e < 8u; e++) {
            s += sums[first + e];
        }
        let d = a / 127.0;
        let at = 8u * total + 2u * (g >> 3u);
        xq[at] = bitcast<u32>(d);
        xq[at + 1u] = bitcast<u32>(d * f32(s));
    }
}
