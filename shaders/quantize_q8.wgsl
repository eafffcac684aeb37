// quantize_q8  x's rows to int8 blocks for the int8 GEMV (gemv_xq8.wgsl): per 32 values d = max|x| / 127,
//              q = round(x / d) (four per word), and s = d · Σq, as llama.cpp's q8_1
// Layout       x: [m, k] f32 read as vec4; xq: u32, block j = i · blocks + b of row i: quants at words 8j .. 8j+7
//              (value 4t + e in byte e of word t), then after all m · blocks blocks (d, s) as f32 bits at
//              words 8 · m · blocks + 2j, + 1
// Launch       one thread per vec4 of x (eight per block, neighbouring lanes on neighbouring vec4s), 256-thread
//              groups over grid_1d's 2D grid
// Numerics     q in -127 ..= 127 (d = 0 for an all-zero block gives q = 0); round() ties to even; the block's max
//              and Σq are exact whatever their order

struct Params { blocks: u32, m: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> xq: array<u32>;

var<workgroup> amax: array<f32, 256>;
var<workgroup> sums: array<i32, 256>;

@compute @workgroup_size(256)
fn quantize_q8(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let g = (wg.x + wg.y * nwg.x) * 256u + lane;
    let total = params.blocks * params.m;
    let inside = g < 8u * total;
    // Every lane reaches the barriers; lanes past the end carry zeros.
    let v = select(vec4<f32>(0.0), x[min(g, 8u * total - 1u)], inside);
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
