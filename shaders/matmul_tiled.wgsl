// matmul_tiled  dst[i, j] = Σ_k x[i, k] · w[j, k] for m ≥ 32 (prefill, batched decode, verify): one BM × BN tile
// Layout        x: [m, k] f32; w: [n, k] in the format of the joined decode_*.wgsl; dst: [m, n] f32; per K step of 32
//               the slabs xs [32][BM] and ws [32][BN] in workgroup memory, k-major, as quads of T (f32, or f16)
// Launch        grid (ceil(n / BN), ceil(m / BM)); 256 threads = 16 × 16 (tx, ty); thread (tx, ty) owns rows
//               4·ty + 64a + r and columns 4·tx + 64b + c (a < BM / 64, b < BN / 64, r, c < 4), BM = BN
// Numerics      as the joined tile32_*.wgsl: per output the same order over k whatever m or the tile (so results
//               do not depend on the batch for m ≥ 32), but not the GEMV kernels' order (m < 32)

const THREADS: u32 = 256u;
// Row (column) quads per thread: the register tile is (4·TMQ) × (4·TNQ).
const TMQ: u32 = BM / 64u;
const TNQ: u32 = BN / 64u;

struct Params { info: WeightInfo, m: u32, n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

// Slab element (kk, i) is component i % 4 of quad kk·BM/4 + i/4: a thread's four rows (columns)
// are one load, and the threads of a store touch consecutive words (no bank conflicts either way).
var<workgroup> xs: array<vec4<T>, 8u * BM>;
var<workgroup> ws: array<vec4<T>, 8u * BN>;
// The register tile: quad (4a + r)·TNQ + b holds row 4·ty + 64a + r, columns 4·tx + 64b + 0..3.
var<private> acc: array<vec4<f32>, 4u * TMQ * TNQ>;

// Decodes weight rows j0 .. j0+BN-1, values 32s .. 32s+31 into ws: group g of row j per pass, rows past
// n repeat row n - 1 (their outputs are never written).
fn load_w(j0: u32, s: u32, lane: u32) {
    for (var p = 0u; p < BN / 64u; p++) {
        let idx = lane + THREADS * p;
        let j = idx % BN;
        let g = idx / BN;
        let v = decode8(params.info, min(j0 + j, params.n - 1u), 4u * s + g);
        for (var e = 0u; e < 4u; e++) {
            ws[(8u * g + e) * (BN / 4u) + j / 4u][j % 4u] = T(v.a[e]);
            ws[(8u * g + 4u + e) * (BN / 4u) + j / 4u][j % 4u] = T(v.b[e]);
        }
    }
}

// Loads x rows i0 .. i0+BM-1, columns 32s .. 32s+31 into xs, zero past m and past k.
fn load_x(i0: u32, s: u32, lane: u32) {
    let k = params.info.k;
    for (var p = 0u; p < BM / 32u; p++) {
        let idx = lane + THREADS * p;
        let i = idx % BM;
        let kq = idx / BM;
        let row = min(i0 + i, params.m - 1u);
        for (var e = 0u; e < 4u; e++) {
            let c = 32u * s + 4u * kq + e;
            let v = select(0.0, x[row * k + min(c, k - 1u)], i0 + i < params.m && c < k);
            xs[(4u * kq + e) * (BM / 4u) + i / 4u][i % 4u] = T(v);
        }
    }
}

@compute @workgroup_size(THREADS)
fn matmul_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let tx = lane % 16u;
    let ty = lane / 16u;
    let j0 = wg.x * BN;
    let i0 = wg.y * BM;
    let steps = (params.info.k + 31u) / 32u;
    for (var s = 0u; s < steps; s++) {
        load_w(j0, s, lane);
        load_x(i0, s, lane);
        workgroupBarrier();
        tile_step(tx, ty);
        workgroupBarrier(); // the next step overwrites the slabs
    }
    for (var a = 0u; a < TMQ; a++) {
        for (var r = 0u; r < 4u; r++) {
            let i = i0 + 4u * ty + 64u * a + r;
            for (var b = 0u; b < TNQ; b++) {
                let t = acc[(4u * a + r) * TNQ + b];
                for (var c = 0u; c < 4u; c++) {
                    let j = j0 + 4u * tx + 64u * b + c;
                    if (i < params.m && j < params.n) {
                        dst[i * params.n + j] = t[c];
                    }
                }
            }
        }
    }
}
