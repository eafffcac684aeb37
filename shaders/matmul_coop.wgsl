// matmul_coop  dst[i, j] = Σ_k x[i, k] · w[j, k] for m ≥ 64 on cooperative matrices (tensor / matrix cores): one BM × BN tile
// Layout       x: [m, k] f32; w: [n, k] quantized (one part), decoded by the joined decode_*.wgsl; dst: [m, ldd] f32, columns
//              col0 .. col0 + n. Per step of KS = 64 values of k (two quant blocks; zeros past k): xs [BM][KP] (x rows) and
//              ws [BN][KP] (w rows) in f16, row-major
// Launch       grid (ceil(n / BN), ceil(m / BM)); 4 subgroups of SG lanes; subgroup s owns the 2 × 2 CM-square C tiles at rows
//              (s / 2)·2CM, columns (s % 2)·2CM of the tile; the host defines CM, SG and the MatA/MatB/MatC aliases
// Numerics     x and the decoded weights rounded to f16; their products summed in f32 by the matrix unit (in its own order
//              within each CM-wide slice of k), slices in ascending k: per output the same order whatever m

const THREADS: u32 = 4u * SG;
const BM: u32 = 4u * CM;
const BN: u32 = 4u * CM;
// k per step (two quant blocks: one barrier pair per 64 values), and the slabs' row stride in halves: 144 bytes
// keeps every CM-wide slice 16-byte aligned, and the 8 extra halves move neighbouring rows to other banks.
const KS: u32 = 64u;
const KP: u32 = KS + 8u;

struct Params { info: WeightInfo, m: u32, n: u32, col0: u32, ldd: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

var<workgroup> xs: array<f16, BM * KP>;
var<workgroup> ws: array<f16, BN * KP>;
// Weight rows j0 .. j0+BN-1, values KS·s .. KS·s + KS-1 into ws: one unit = 8 values of one row (rows past n repeat
// row n - 1, never stored; values past k are zeros: the second block of the last step when k is an odd number of blocks).
fn load_w(j0: u32, s: u32, lane: u32) {
    let groups = params.info.k / 8u;
    for (var u = lane; u < BN * (KS / 8u); u += THREADS) {
        let r = u / (KS / 8u);
        let g = u % (KS / 8u);
        let gg = (KS / 8u) * s + g;
        var v = decode8(params.info, min(j0 + r, params.n - 1u), min(gg, groups - 1u));
        if (gg >= groups) {
            v = Vals8(vec4<f32>(), vec4<f32>());
        }
        let o = r * KP + 8u * g;
        ws[o] = f16(v.a.x); ws[o + 1u] = f16(v.a.y); ws[o + 2u] = f16(v.a.z); ws[o + 3u] = f16(v.a.w);
        ws[o + 4u] = f16(v.b.x); ws[o + 5u] = f16(v.b.y); ws[o + 6u] = f16(v.b.z); ws[o + 7u] = f16(v.b.w);
    }
}

// x rows i0 .. i0+BM-1, values KS·s .. KS·s + KS-1 into xs: one unit = 4 values (rows past m repeat row m - 1, never
// stored; values past k are zeros).
fn load_x(i0: u32, s: u32, lane: u32) {
    let k4 = params.info.k / 4u;
    for (var u = lane; u < BM * (KS / 4u); u += THREADS) {
        let r = u / (KS / 4u);
        let c = (KS / 4u) * s + u % (KS / 4u);
        let v = select(vec4<f32>(), x[min(i0 + r, params.m - 1u) * k4 + min(c, k4 - 1u)], c < k4);
        let cc = u % (KS / 4u);
        let o = r * KP + 4u * cc;
        xs[o] = f16(v.x); xs[o + 1u] = f16(v.y); xs[o + 2u] = f16(v.z); xs[o + 3u] = f16(v.w);
    }
}

@compute @workgroup_size(THREADS)
fn matmul_coop(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let sg = lane / SG;
    let r0 = (sg / 2u) * 2u * CM;
    let c0 = (sg % 2u) * 2u * CM;
    let j0 = wg.x * BN;
    let i0 = wg.y * BM;
    var c00 = MatC();
    var c01 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    let steps = (params.info.k + KS - 1u) / KS;
    for (var s = 0u; s < steps; s++) {
        load_w(j0, s, lane);
        load_x(i0, s, lane);
        workgroupBarrier();
        for (var kk = 0u; kk < KS; kk += CM) {
            let a0 = coopLoadT<MatA>(&xs[r0 * KP + kk], KP);
            let a1 = coopLoadT<MatA>(&xs[(r0 + CM) * KP + kk], KP);
            // ws holds w rows, so B (k × columns) is column-major there.
            let b0 = coopLoad<MatB>(&ws[c0 * KP + kk], KP);
            let b1 = coopLoad<MatB>(&ws[(c0 + CM) * KP + kk], KP);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier(); // the next step overwrites the slabs
    }
    let sl = lane % SG;
    store(c00, sg, sl, i0 + r0, j0 + c0);
    store(c01, sg, sl, i0 + r0, j0 + c0 + CM);
    store(c10, sg, sl, i0 + r0 + CM, j0 + c0);
    store(c11, sg, sl, i0 + r0 + CM, j0 + c0 + CM);
}
