// matmul    dst[i, j] = Σ_k x[i, k] · w[j, k]   (decode: few rows of x, weights dequantized on the fly)
// Layout    x: [m, k] f32; w: [n, k] in the format of the joined decode_*.wgsl; dst: [m, n] f32
// Launch    grid (ceil(n / ROWS), m); WG threads, TPR per output row, each summing groups of 8 values
// Numerics  f32 fused multiply-add per lane, then row_sum (reduce_shared or reduce_subgroup)

const ROWS: u32 = WG / TPR;

struct Params { info: WeightInfo, m: u32, n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

// x[i, 8g .. 8g+7], zero past k.
fn x8(i: u32, g: u32) -> Vals8 {
    let k = params.info.k;
    let base = i * k + g * 8u;
    if (g * 8u + 8u <= k) {
        return Vals8(vec4<f32>(x[base], x[base + 1u], x[base + 2u], x[base + 3u]),
                     vec4<f32>(x[base + 4u], x[base + 5u], x[base + 6u], x[base + 7u]));
    }
    var v: array<f32, 8>;
    for (var e = 0u; e < 8u; e++) {
        v[e] = select(0.0, x[base + e], g * 8u + e < k);
    }
    return Vals8(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
}

@compute @workgroup_size(WG)
fn matmul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = wg.x * ROWS + lane / TPR;
    let i = wg.y;
    let groups = (params.info.k + 7u) / 8u;
    var acc = 0.0;
    if (row < params.n) {
        for (var g = lane % TPR; g < groups; g += TPR) {
            let wv = decode8(params.info, row, g);
            let xv = x8(i, g);
            acc += dot(wv.a, xv.a) + dot(wv.b, xv.b);
        }
    }
    let total = row_sum(acc, lane);
    if (row < params.n && lane % TPR == 0u) {
        dst[i * params.n + row] = total;
    }
}
