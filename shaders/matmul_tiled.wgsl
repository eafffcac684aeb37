// matmul_tiled  dst[i, j] = Σ_k x[i, k] · w[j, k] for m ≥ 32 (prefill, batched decode, verify): one 64 × BN tile
// Layout        x: [m, k] f32; w: [n, k] (one part of the weight) in the format of the joined decode_*.wgsl;
//               dst: [m, ldd] f32, columns col0 .. col0 + n; per K step of 64 (two quant blocks) the slabs
//               xs [64][16] and ws [64][BN / 4] in workgroup memory: k-major, each element
//               a quad of T (f32, or f16) holding 4 consecutive rows of x (columns of dst) at one k
// Launch        grid (ceil(n / BN), ceil(m / 64)); 256 threads = 16 × 16 (tx, ty); thread (tx, ty) owns rows 4·ty + r
//               and columns 4·tx + c (r, c < 4), and with BN = 128 also columns 64 + 4·tx + c: a 4 × 4 (4 × 8) tile
//               in the named vec4 fields of Tile, never an array, so nothing can be indexed at run time or spilled
// Numerics      as the joined tile32_*.wgsl: per output the same order over k whatever m or the tile (so results
//               do not depend on the batch for m ≥ 32), but not the GEMV kernels' order (m < 32)

const THREADS: u32 = 256u;
const BM: u32 = 64u;
// k per step, and quads (of rows or columns) per slab row.
const KS: u32 = 64u;
const BMQ: u32 = BM / 4u;
const BNQ: u32 = BN / 4u;
// A second column quad per thread (BN = 128).
const WIDE: bool = BN == 128u;

// n: the weight part's rows; it writes dst columns col0 .. col0 + n of rows ldd wide.
struct Params { info: WeightInfo, m: u32, n: u32, col0: u32, ldd: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

// xs[kk·BMQ + q] = x rows 4q .. 4q+3 at k = 64s + kk; ws[kk·BNQ + q] = w rows (dst columns) 4q .. 4q+3.
// The compute loop reads one quad of each per kk (consecutive tx: consecutive quads, no bank
// conflicts), and every store writes a whole quad, transposed in registers.
var<workgroup> xs: array<vec4<T>, KS * BMQ>;
var<workgroup> ws: array<vec4<T>, KS * BNQ>;

// A thread's outputs: aR holds row 4·ty + R, columns 4·tx + 0..3; bR the same row, columns 64 + 4·tx + 0..3
// (BN = 128 only; otherwise always zero and never stored).
struct Tile {
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,
}

// 8 values of weight row `row` from group gg (values 8gg .. 8gg+7): zero past k (the second block of
// the last step when k is an odd number of blocks); rows past n repeat row n - 1 (never stored).
fn w8(row: u32, gg: u32) -> Vals8 {
    let k = params.info.k;
    let v = decode8(params.info, min(row, params.n - 1u), min(gg, (k - 1u) / 8u));
    let live = 8u * gg < k;
    return Vals8(select(vec4<f32>(), v.a, live), select(vec4<f32>(), v.b, live));
}

// Decodes weight rows j0 .. j0+BN-1, values 64s .. 64s+63 into ws: one unit = 4 rows × one 8-value group,
// stored as 8 quads (BN / 4 · 8 units: half the threads for BN = 64, all of them for 128).
fn load_w(j0: u32, s: u32, lane: u32) {
    for (var u = lane; u < BNQ * (KS / 8u); u += THREADS) {
        let q = u % BNQ;
        let g = u / BNQ;
        let j = j0 + 4u * q;
        let gg = (KS / 8u) * s + g;
        let v0 = w8(j, gg);
        let v1 = w8(j + 1u, gg);
        let v2 = w8(j + 2u, gg);
        let v3 = w8(j + 3u, gg);
        // Column e of ta is value e of the four rows.
        let ta = transpose(mat4x4<f32>(v0.a, v1.a, v2.a, v3.a));
        let tb = transpose(mat4x4<f32>(v0.b, v1.b, v2.b, v3.b));
        let base = 8u * g * BNQ + q;
        ws[base] = vec4<T>(ta[0]);
        ws[base + BNQ] = vec4<T>(ta[1]);
        ws[base + 2u * BNQ] = vec4<T>(ta[2]);
        ws[base + 3u * BNQ] = vec4<T>(ta[3]);
        ws[base + 4u * BNQ] = vec4<T>(tb[0]);
        ws[base + 5u * BNQ] = vec4<T>(tb[1]);
        ws[base + 6u * BNQ] = vec4<T>(tb[2]);
        ws[base + 7u * BNQ] = vec4<T>(tb[3]);
    }
}

// 4 values of x row `row` from k = c: zero past k; rows past m repeat row m - 1 (never stored).
fn x4(row: u32, c: u32) -> vec4<f32> {
    let k = params.info.k;
    let base = min(row, params.m - 1u) * k;
    return vec4<f32>(select(0.0, x[base + min(c, k - 1u)], c < k),
                     select(0.0, x[base + min(c + 1u, k - 1u)], c + 1u < k),
                     select(0.0, x[base + min(c + 2u, k - 1u)], c + 2u < k),
                     select(0.0, x[base + min(c + 3u, k - 1u)], c + 3u < k));
}

// Loads x rows i0 .. i0+63, columns 64s .. 64s+63 into xs: one unit (4 rows × 4 k, stored as 4 quads) per thread.
fn load_x(i0: u32, s: u32, lane: u32) {
    for (var u = lane; u < BMQ * (KS / 4u); u += THREADS) {
        let q = u % BMQ;
        let kq = u / BMQ;
        let i = i0 + 4u * q;
        let c = KS * s + 4u * kq;
        let t = transpose(mat4x4<f32>(x4(i, c), x4(i + 1u, c), x4(i + 2u, c), x4(i + 3u, c)));
        let base = 4u * kq * BMQ + q;
        xs[base] = vec4<T>(t[0]);
        xs[base + BMQ] = vec4<T>(t[1]);
        xs[base + 2u * BMQ] = vec4<T>(t[2]);
        xs[base + 3u * BMQ] = vec4<T>(t[3]);
    }
}

// Row i of the tile: columns j .. j+3 of dst where they exist.
fn store4(i: u32, j: u32, v: vec4<f32>) {
    if (i >= params.m) {
        return;
    }
    let n = params.n;
    let o = i * params.ldd + params.col0 + j;
    if (j < n) { dst[o] = v.x; }
    if (j + 1u < n) { dst[o + 1u] = v.y; }
    if (j + 2u < n) { dst[o + 2u] = v.z; }
    if (j + 3u < n) { dst[o + 3u] = v.w; }
}

@compute @workgroup_size(THREADS)
fn matmul_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let tx = lane % 16u;
    let ty = lane / 16u;
    let j0 = wg.x * BN;
    let i0 = wg.y * BM;
    let steps = (params.info.k + KS - 1u) / KS;
    var t = Tile(vec4<f32>(), vec4<f32>(), vec4<f32>(), vec4<f32>(),
                 vec4<f32>(), vec4<f32>(), vec4<f32>(), vec4<f32>());
    for (var s = 0u; s < steps; s++) {
        load_w(j0, s, lane);
        load_x(i0, s, lane);
        workgroupBarrier();
        for (var kb = 0u; kb < KS; kb += 32u) {
            t = tile_block(t, kb, tx, ty);
        }
        workgroupBarrier(); // the next step overwrites the slabs
    }
    let i = i0 + 4u * ty;
    let j = j0 + 4u * tx;
    store4(i, j, t.a0);
    store4(i + 1u, j, t.a1);
    store4(i + 2u, j, t.a2);
    store4(i + 3u, j, t.a3);
    if (WIDE) {
        store4(i, j + 64u, t.b0);
        store4(i + 1u, j + 64u, t.b1);
        store4(i + 2u, j + 64u, t.b2);
        store4(i + 3u, j + 64u, t.b3);
    }
}
