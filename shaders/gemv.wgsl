// gemv        the quantized GEMV of matmul_vec, matmul_vec_parts and matmul_vec_silu: dst[i, j] = Σ_k x[i, k] · w[j, k], whole
//             blocks per lane, 4 weight rows per team; the entry point binds w (`wload`), x (`xload`) and dst (`put`)
// Layout      x: [m, k] f32 read as vec4, or with int8 activations quantize_q8.wgsl's blocks (gemv_xq8.wgsl); w: repacked
//             blocks read as vec4<u32> (decode32_<format>.wgsl);
//             dst: [m, ldd] f32, columns col0 .. col0 + n (w: n rows, one part of the weight); k is a multiple of
//             32 (whole blocks)
// Launch      per weight, grid (ceil(n / (4·TEAMS)), ceil(m / MB)); WG threads = TEAMS teams of TPR lanes; a team owns
//             weight rows 4j..4j+3 and lane t the blocks b ≡ t (mod TPR) of those rows, for MB rows of x,
//             loading UNROLL of its blocks (4 rows each) before computing on them, so that many loads
//             are in flight per lane (k = 4096 gives a lane only 4 blocks a row); TPR = 1 (CPU adapters)
//             takes the x rows one after another, all blocks each
//             STAGE_X (m = 1, f32 x): x goes through workgroup memory, XCB blocks at a time (gemv_staged)
// Numerics    per (row, x-row, block): `block_acc` (gemv_x32.wgsl: acc = block_fma(d, v, x, acc) of dot32_f32.wgsl, f32
//             on every adapter [+ fma(m, Σx, acc)]; or gemv_xq8.wgsl's integer dot products) over the lane's
//             blocks, then row_sum4 over the team: the same order for every m, MB and UNROLL (bit-identical batches)
//
// The decoder (decode32_<format>.wgsl) gives each 32-value block as `raw` (its loads: `Raw` with
// at least d, m, d2, m2) and `vals` (its values v, small integers), the block being d·v [+ m]:
// HAS_MIN adds m·Σx over the block. HALVES (Q2_K, Q3_K, Q6_K: 16-value sub-blocks) gives values
// 0..15 d and m, values 16..31 d2 and m2: each half's dot and Σx is scaled by its own (block_fma2).
// A decoder may also give the values as packed bytes (`ints`, with INT_OFF), for the int8 GEMV.

const TEAMS: u32 = WG / TPR;
const ROWS: u32 = TEAMS * 4u;

// As in common.wgsl (not joined here: its helpers read weights as u32, these as vec4<u32>).
struct WeightInfo { k: u32, blocks: u32, qh: u32, d: u32, sc: u32, pad0: u32, pad1: u32, pad2: u32 }

// Set by the entry point (matmul_vec.wgsl, matmul_vec_parts.wgsl) before `gemv`: the weight's geometry, its
// rows n, x's rows m, and where its outputs go: dst columns col0 .. col0 + n of rows ldd wide.
var<private> info: WeightInfo;
var<private> n_rows: u32;
var<private> m_rows: u32;
var<private> col0: u32;
var<private> ldd: u32;

// 32 consecutive values as 8 quads.
struct Blk { v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
             v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32> }

// Word `i` of the weight buffer.
fn word(i: u32) -> u32 {
    return wload(i >> 2u)[i & 3u];
}

// The f16 scale of block `blk` from a section of packed f16 pairs.
fn half_of(section: u32, blk: u32) -> f32 {
    return unpack2x16float(word(section + (blk >> 1u)))[blk & 1u];
}

// Nibbles of a word's four bytes (low nibbles when shift = 0, high when shift = 4).
fn nib4(q: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) >> vec4<u32>(shift)) & vec4<u32>(0xfu);
}

// Four signed bytes of a word, lowest first.
fn sbyte4(q: u32) -> vec4<f32> {
    let v = bitcast<vec4<i32>>(vec4<u32>(q << 24u, q << 16u, q << 8u, q)) >> vec4<u32>(24u);
    return vec4<f32>(v);
}

// A block's 32 values as packed signed bytes for the int8 GEMV (gemv_xq8.wgsl): values 4t .. 4t+3 in word t of
// a, values 16 + 4t .. in word t of b. A decoder that has `ints` gives them with INT_OFF: value = byte + INT_OFF.
struct Ints { a: vec4<u32>, b: vec4<u32> }

// The low and high nibbles of four words as bytes (values 0 .. 15): Q4_0's quads, low nibbles first.
fn nibble_ints(q: vec4<u32>) -> Ints {
    return Ints(q & vec4<u32>(0x0f0f0f0fu), (q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu));
}

// Bits j .. j+3 of h, each moved to bit 4 of its own byte (the fifth bits of values j .. j+3).
fn fifth4(h: u32, j: u32) -> u32 {
    let t = (h >> j) & 0xfu;
    return ((t & 1u) << 4u) | ((t & 2u) << 11u) | ((t & 4u) << 18u) | ((t & 8u) << 25u);
}

// nibble_ints with the fifth bit of every value from h (bit j: value j).
fn five_bit_ints(q: vec4<u32>, h: u32) -> Ints {
    let n = nibble_ints(q);
    return Ints(n.a | vec4<u32>(fifth4(h, 0u), fifth4(h, 4u), fifth4(h, 8u), fifth4(h, 12u)),
                n.b | vec4<u32>(fifth4(h, 16u), fifth4(h, 20u), fifth4(h, 24u), fifth4(h, 28u)));
}

// vec4 `at` of f32 x (the entry point's `xload` gives vec4<f32>, or vec4<u32> with int8 activations, whose
// kernels never call this).
fn xf(at: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(xload(at));
}

// Σ b over a block (for formats with a minimum).
fn sum32(b: Blk) -> f32 {
    let s = ((b.v0 + b.v1) + (b.v2 + b.v3)) + ((b.v4 + b.v5) + (b.v6 + b.v7));
    return (s.x + s.y) + (s.z + s.w);
}

// Σ b over each 16-value half of a block (HALVES).
fn sum16x2(b: Blk) -> vec2<f32> {
    let lo = (b.v0 + b.v1) + (b.v2 + b.v3);
    let hi = (b.v4 + b.v5) + (b.v6 + b.v7);
    return vec2<f32>((lo.x + lo.y) + (lo.z + lo.w), (hi.x + hi.y) + (hi.z + hi.w));
}

// One block of each of four weight rows: what a lane loads before it computes.
struct Raw4 { r0: Raw, r1: Raw, r2: Raw, r3: Raw }

fn load4(rows: vec4<u32>, b: u32) -> Raw4 {
    return Raw4(raw(info, rows.x + b), raw(info, rows.y + b), raw(info, rows.z + b),
                raw(info, rows.w + b));
}

// Four weight rows' block (loaded) against the matching 32 values of x, added to acc.
fn block_acc_x(w: Raw4, xb: Blk, acc: vec4<f32>) -> vec4<f32> {
    let d = vec4<f32>(w.r0.d, w.r1.d, w.r2.d, w.r3.d);
    let m = vec4<f32>(w.r0.m, w.r1.m, w.r2.m, w.r3.m);
    if (HALVES) {
        let d2 = vec4<f32>(w.r0.d2, w.r1.d2, w.r2.d2, w.r3.d2);
        var a = block_fma2(d, d2, vals(w.r0), vals(w.r1), vals(w.r2), vals(w.r3), xb, acc);
        if (HAS_MIN) {
            let s = sum16x2(xb);
            let m2 = vec4<f32>(w.r0.m2, w.r1.m2, w.r2.m2, w.r3.m2);
            a = fma(m2, vec4<f32>(s.y), fma(m, vec4<f32>(s.x), a));
        }
        return a;
    }
    var a = block_fma(d, vals(w.r0), vals(w.r1), vals(w.r2), vals(w.r3), xb, acc);
    if (HAS_MIN) {
        a = fma(m, vec4<f32>(sum32(xb)), a);
    }
    return a;
}

// dst[i, row .. row + 3] = v, the rows below n (a team's four outputs for row i of x).
fn put4(i: u32, row: u32, n: u32, v: vec4<f32>) {
    let at = i * ldd + col0 + row;
    for (var r = 0u; r < 4u; r++) {
        if (row + r < n) {
            put(at + r, v[r]);
        }
    }
}

// Workgroup (gx, gy) of the weight's grid: its TEAMS teams' rows, MB rows of x from gy·MB.
fn gemv(gx: u32, gy: u32, lane: u32) {
    let n = n_rows;
    let row = (gx * TEAMS + lane / TPR) * 4u;
    let rows = min(vec4<u32>(row) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(n - 1u)) * info.blocks;
    let i0 = gy * MB;
    if (STAGE_X) {
        gemv_staged(rows, row, n, i0, lane);
        return;
    }
    if (TPR == 1u) {
        for (var i = i0; i < min(i0 + MB, m_rows); i++) {
            var a = vec4<f32>(0.0);
            for (var b = 0u; b < info.blocks; b++) {
                a = block_acc(load4(rows, b), b, i, a);
            }
            put4(i, row, n, a);
        }
        return;
    }
    // Lane t sums blocks t, t + TPR, t + 2·TPR, ... in that order whatever UNROLL is; UNROLL only
    // says how many of them it loads before computing (independent loads in flight per lane).
    var acc: array<vec4<f32>, MB>;
    var b = lane % TPR;
    let blocks = info.blocks;
    if (UNROLL >= 4u) {
        for (; b + 3u * TPR < blocks; b += 4u * TPR) {
            let w0 = load4(rows, b);
            let w1 = load4(rows, b + TPR);
            let w2 = load4(rows, b + 2u * TPR);
            let w3 = load4(rows, b + 3u * TPR);
            for (var i = 0u; i < MB; i++) {
                if (i0 + i < m_rows) {
                    var a = block_acc(w0, b, i0 + i, acc[i]);
                    a = block_acc(w1, b + TPR, i0 + i, a);
                    a = block_acc(w2, b + 2u * TPR, i0 + i, a);
                    acc[i] = block_acc(w3, b + 3u * TPR, i0 + i, a);
                }
            }
        }
    }
    if (UNROLL >= 2u) {
        for (; b + TPR < blocks; b += 2u * TPR) {
            let w0 = load4(rows, b);
            let w1 = load4(rows, b + TPR);
            for (var i = 0u; i < MB; i++) {
                if (i0 + i < m_rows) {
                    acc[i] = block_acc(w1, b + TPR, i0 + i, block_acc(w0, b, i0 + i, acc[i]));
                }
            }
        }
    }
    for (; b < blocks; b += TPR) {
        let w0 = load4(rows, b);
        for (var i = 0u; i < MB; i++) {
            if (i0 + i < m_rows) {
                acc[i] = block_acc(w0, b, i0 + i, acc[i]);
            }
        }
    }
    for (var i = 0u; i < MB; i++) {
        let total = row_sum4(acc[i], lane);
        if (lane % TPR == 0u && i0 + i < m_rows) {
            put4(i0 + i, row, n, total);
        }
    }
}

var<workgroup> staged_blocks: u32;

// Staged block jb (0 .. XCB) of x: 8 vec4s at jb · 9 (one vec4 of padding per block, so that the 8 lanes of a
// 128-bit access phase, reading blocks 9 vec4s apart, hit 8 distinct groups of 4 banks).
fn xstaged(jb: u32) -> Blk {
    let a = jb * 9u;
    return Blk(xs[a], xs[a + 1u], xs[a + 2u], xs[a + 3u], xs[a + 4u], xs[a + 5u], xs[a + 6u], xs[a + 7u]);
}

// STAGE_X (one row of x, teams of TPR > 1 lanes): the workgroup copies x to workgroup memory XCB = 2·TPR blocks
// at a time, neighbouring lanes loading neighbouring vec4s, and each lane reads its blocks from there: where
// every lane read its own 128 bytes of x straight from memory, 128 bytes apart, which takes one cache line
// per lane per load. A lane's blocks, and their order, are the unstaged kernel's (chunks start at multiples of
// TPR): the same bits. Each chunk's weight loads are issued before x is staged, so the two overlap.
fn gemv_staged(rows: vec4<u32>, row: u32, n: u32, i: u32, lane: u32) {
    // The chunk loop holds barriers, so its bound must be uniform to WGSL's analysis, which a private
    // variable's value is not: pass it through workgroup memory.
    if (lane == 0u) {
        staged_blocks = info.blocks;
    }
    let blocks = workgroupUniformLoad(&staged_blocks);
    let t = lane % TPR;
    let xrow = i * (info.k >> 2u);
    var acc = vec4<f32>(0.0);
    for (var c0 = 0u; c0 < blocks; c0 += XCB) {
        let nb = min(XCB, blocks - c0);
        let b0 = c0 + t;
        let b1 = b0 + TPR;
        let w0 = load4(rows, min(b0, blocks - 1u));
        let w1 = load4(rows, min(b1, blocks - 1u));
        workgroupBarrier(); // the previous chunk is consumed
        for (var e = lane; e < nb * 8u; e += WG) {
            xs[(e >> 3u) * 9u + (e & 7u)] = xf(xrow + c0 * 8u + e);
        }
        workgroupBarrier();
        if (b0 < blocks) {
            acc = block_acc_x(w0, xstaged(t), acc);
        }
        if (b1 < blocks) {
            acc = block_acc_x(w1, xstaged(t + TPR), acc);
        }
    }
    let total = row_sum4(acc, lane);
    if (t == 0u && i < m_rows) {
        put4(i, row, n, total);
    }
}
