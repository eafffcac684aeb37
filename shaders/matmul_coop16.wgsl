// matmul_coop16  dst[i, j] = Σ_k x[i, k] · w[j, k] on cooperative matrices from operands already in f16: one BM × BN tile
// Layout         xh: [m_pad, k] f16 (to_f16.wgsl; m_pad a multiple of BM); wh: [n_pad, k] f16 (dequant_f16.wgsl: the
//                call's weight rows; n_pad a multiple of BN); dst: [m, ldd] f32, columns col0 .. col0 + n. Both operands
//                are read straight from storage: nothing to decode or convert per tile, so no slabs and no barrier per
//                step of k
// Launch         grid (n_pad / BN, m_pad / BM); 4 subgroups of SG lanes, subgroup s owning TM × TN C tiles of side CM
//                at rows (s / 2)·TM·CM, columns (s % 2)·TN·CM of the tile; k a multiple of 2·CM; the host defines CM, SG
//                and the MatA/MatB/MatC aliases
// Numerics       matmul_coop's: f16 operands, f32 sums by the matrix unit within each CM-wide slice of k, slices in
//                ascending k: per output the same order whatever m

const THREADS: u32 = 4u * SG;
// C tiles per subgroup: each A matrix loaded serves TN products, each B matrix TM.
const TM: u32 = 2u;
const TN: u32 = 4u;
const BM: u32 = 2u * TM * CM;
const BN: u32 = 2u * TN * CM;

struct Params { k: u32, m: u32, n: u32, col0: u32, ldd: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> xh: array<f16>;
@group(0) @binding(2) var<storage, read> wh: array<f16>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(THREADS)
fn matmul_coop16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let sg = lane / SG;
    let i = wg.y * BM + (sg / 2u) * TM * CM;
    let j = wg.x * BN + (sg % 2u) * TN * CM;
    let k = params.k;
    var c00 = MatC();
    var c01 = MatC();
    var c02 = MatC();
    var c03 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    var c12 = MatC();
    var c13 = MatC();
    // Two slices of k per step, all twelve loads issued before the sixteen products: one slice's six loads
    // left each product waiting on storage in turn. k is a multiple of 2·CM (whole 32-value blocks).
    for (var kk = 0u; kk < k; kk += 2u * CM) {
        let a0 = coopLoadT<MatA>(&xh[i * k + kk], k);
        let a1 = coopLoadT<MatA>(&xh[(i + CM) * k + kk], k);
        // wh holds w rows, so B (k × columns) is column-major there.
        let b0 = coopLoad<MatB>(&wh[j * k + kk], k);
        let b1 = coopLoad<MatB>(&wh[(j + CM) * k + kk], k);
        let b2 = coopLoad<MatB>(&wh[(j + 2u * CM) * k + kk], k);
        let b3 = coopLoad<MatB>(&wh[(j + 3u * CM) * k + kk], k);
        let k2 = kk + CM;
        let a2 = coopLoadT<MatA>(&xh[i * k + k2], k);
        let a3 = coopLoadT<MatA>(&xh[(i + CM) * k + k2], k);
        let b4 = coopLoad<MatB>(&wh[j * k + k2], k);
        let b5 = coopLoad<MatB>(&wh[(j + CM) * k + k2], k);
        let b6 = coopLoad<MatB>(&wh[(j + 2u * CM) * k + k2], k);
        let b7 = coopLoad<MatB>(&wh[(j + 3u * CM) * k + k2], k);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c02 = coopMultiplyAdd(a0, b2, c02);
        c03 = coopMultiplyAdd(a0, b3, c03);
        c10 = coopMultiplyAdd(a1, b0, c10);
        c11 = coopMultiplyAdd(a1, b1, c11);
        c12 = coopMultiplyAdd(a1, b2, c12);
        c13 = coopMultiplyAdd(a1, b3, c13);
        c00 = coopMultiplyAdd(a2, b4, c00);
        c01 = coopMultiplyAdd(a2, b5, c01);
        c02 = coopMultiplyAdd(a2, b6, c02);
        c03 = coopMultiplyAdd(a2, b7, c03);
        c10 = coopMultiplyAdd(a3, b4, c10);
        c11 = coopMultiplyAdd(a3, b5, c11);
        c12 = coopMultiplyAdd(a3, b6, c12);
        c13 = coopMultiplyAdd(a3, b7, c13);
    }
    let sl = lane % SG;
    store(c00, sg, sl, i, j);
    store(c01, sg, sl, i, j + CM);
    store(c02, sg, sl, i, j + 2u * CM);
    store(c03, sg, sl, i, j + 3u * CM);
    store(c10, sg, sl, i + CM, j);
    store(c11, sg, sl, i + CM, j + CM);
    store(c12, sg, sl, i + CM, j + 2u * CM);
    store(c13, sg, sl, i + CM, j + 3u * CM);
}
