// matmul    dst[i, j] = Σ_k x[i, k] · w[j, k]   (weights dequantized on the fly, read once per MB rows of x)
// Layout    x: [m, k] f32; w: [n, k] (one part of the weight) in the format of the joined decode_*.wgsl;
//           dst: [m, ldd] f32, columns col0 .. col0 + n
// Launch    grid (ceil(n / ROWS), ceil(m / MB)); WG threads, TPR per output column j; lane t sums groups
//           of 8 values g ≡ t (mod TPR) for each of the MB rows of x, reusing each decoded group MB times
// Numerics  f32 fma chain per lane in a fixed order, then row_sum: bit-identical for every m and MB

const ROWS: u32 = WG / TPR;

// n: the weight part's rows; it writes dst columns col0 .. col0 + n of rows ldd wide.
struct Params { info: WeightInfo, m: u32, n: u32, col0: u32, ldd: u32 }

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

// acc + w · x as an explicit fma chain (the order every variant shares).
fn dot8(a: Vals8, b: Vals8, acc: f32) -> f32 {
    var s = fma(a.a.x, b.a.x, acc);
    s = fma(a.a.y, b.a.y, s);
    s = fma(a.a.z, b.a.z, s);
    s = fma(a.a.w, b.a.w, s);
    s = fma(a.b.x, b.b.x, s);
    s = fma(a.b.y, b.b.y, s);
    s = fma(a.b.z, b.b.z, s);
    return fma(a.b.w, b.b.w, s);
}

@compute @workgroup_size(WG)
fn matmul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = wg.x * ROWS + lane / TPR;
    let i0 = wg.y * MB;
    let groups = (params.info.k + 7u) / 8u;
    var acc: array<f32, MB>;
    if (row < params.n) {
        for (var g = lane % TPR; g < groups; g += TPR) {
            let wv = decode8(params.info, row, g);
            for (var r = 0u; r < MB; r++) {
                if (i0 + r < params.m) {
                    acc[r] = dot8(wv, x8(i0 + r, g), acc[r]);
                }
            }
        }
    }
    for (var r = 0u; r < MB; r++) {
        let total = row_sum(acc[r], lane);
        if (row < params.n && lane % TPR == 0u && i0 + r < params.m) {
            dst[(i0 + r) * params.ldd + params.col0 + row] = total;
        }
    }
}
