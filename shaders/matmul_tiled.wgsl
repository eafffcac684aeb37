// matmul_tiled  dst[i, j] = Σ_k x[i, k] · w[j, k]   (prefill and batches: many rows of x)
// Layout        x: [m, k] f32; w: [n, k] in the format of the joined decode_*.wgsl; dst: [m, n] f32
// Launch        grid (ceil(n / 64), ceil(m / 64)); 256 threads, each a 4×4 block of a 64×64 tile;
//               per 32-wide k step every thread decodes 8 weights and loads 8 x values into workgroup memory
// Numerics      f32, sequential over k per output

const T: u32 = 64u;   // tile edge (m and n)
const KS: u32 = 32u;  // k step (one quantized block)
const PAD: u32 = 33u; // row pitch in workgroup memory (avoids bank conflicts)

struct Params { info: WeightInfo, m: u32, n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

var<workgroup> xs: array<f32, 2112>; // [T][PAD]
var<workgroup> ws: array<f32, 2112>; // [T][PAD]

@compute @workgroup_size(256)
fn matmul_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let k = params.info.k;
    let m0 = wg.y * T;
    let n0 = wg.x * T;
    let tx = lane % 16u;
    let ty = lane / 16u;
    let r = lane / 4u;  // tile row this thread fills
    let gq = lane % 4u; // group of 8 within the k step
    var acc: array<f32, 16>;
    for (var k0 = 0u; k0 < k; k0 += KS) {
        let g = k0 / 8u + gq;
        var wv = Vals8(vec4<f32>(0.0), vec4<f32>(0.0));
        if (n0 + r < params.n && g * 8u < k) {
            wv = decode8(params.info, n0 + r, g);
        }
        let o = r * PAD + gq * 8u;
        ws[o] = wv.a.x; ws[o + 1u] = wv.a.y; ws[o + 2u] = wv.a.z; ws[o + 3u] = wv.a.w;
        ws[o + 4u] = wv.b.x; ws[o + 5u] = wv.b.y; ws[o + 6u] = wv.b.z; ws[o + 7u] = wv.b.w;
        let xr = m0 + r;
        for (var e = 0u; e < 8u; e++) {
            let col = g * 8u + e;
            xs[o + e] = select(0.0, x[xr * k + col], xr < params.m && col < k);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < KS; kk++) {
            var xa: array<f32, 4>;
            var wb: array<f32, 4>;
            for (var a = 0u; a < 4u; a++) {
                xa[a] = xs[(ty + 16u * a) * PAD + kk];
                wb[a] = ws[(tx + 16u * a) * PAD + kk];
            }
            for (var a = 0u; a < 4u; a++) {
                for (var b = 0u; b < 4u; b++) {
                    acc[a * 4u + b] = fma(xa[a], wb[b], acc[a * 4u + b]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        for (var b = 0u; b < 4u; b++) {
            let i = m0 + ty + 16u * a;
            let j = n0 + tx + 16u * b;
            if (i < params.m && j < params.n) {
                dst[i * params.n + j] = acc[a * 4u + b];
            }
        }
    }
}
