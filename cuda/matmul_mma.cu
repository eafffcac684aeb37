// matmul_mma  dst[m, n] = Σ_k x[m, k] · w[n, k]    (m > 8, quantized weights)
//             body joined after one quantized format decoder (matmul_<format>.cu: mma_b or levels_b, the quants;
//             mma_scale, (s0, s1, m0, m1) with w = q · s_h + m_h in 16-value half h; sc_offset, QS_BYTES,
//             QH_BYTES, SC_BYTES)
// Layout      xh f16 [m][k] from matmul_mma_prep, each 16-value group permuted (value v at position
//             2·(v / 4) + v % 2 + 8·(v / 2 % 2)) so that ldmatrix gives the fragments the weights' decode order
//             needs; weights as uploaded: qs QS_BYTES and qh QH_BYTES per 32-value block, and SC_BYTES of
//             scales per block from dm at sc_offset (a legacy block's d / (d, m) word, a k-quant
//             super-block's scale record)
// Launch      matmul_mma_prep: one thread per value. matmul_mma: grid (ceil(n / 128), ceil(m / 64)), 128 threads =
//             4 warps, each all 64 rows × 32 columns of the 64 × 128 output tile. matmul_mma_split (split-K, for
//             small m whose tiles would not fill the GPU; matmul_mma_split32 the same with a 32 × 128 tile, grid.y
//             ceil(m / 32)): grid.z = splits, split z takes k-blocks [z · per, (z + 1) · per), per = ceil(nb /
//             splits), writes its tile to partial [splits][m][n], and the last of a tile's splits to finish (a
//             counter per tile in done, zero between launches) sums them in z order into dst; matmul_mma32 is
//             matmul_mma with the 32-row tile. k in steps of MMA_KB = 2 32-value blocks (one barrier per step; the
//             last step of a split may hold one), raw blocks copied into shared memory by cp.async, MMA_STAGES = 2
//             deep (one block per step, 3-4 deep, was 6-11% slower in prefill: v23; 3 deep at the 32-row tile
//             gained nothing in batched decode: v24); each weight row's block scales once per step into the stage
//             as f16 (mma_rec_load / mma_rec_store); quants decoded per fragment to exact f16 integers and scaled
//             there
// Numerics    x rounded once to f16; each weight rounded once to f16 as fma(q, s, m) (s and m of a block, or of
//             a 16-value half, themselves rounded to f16: exact for the legacy formats' f16 d and m, one
//             rounding of a k-quant's d · sc); Σ over all of k by mma.sync m16n8k16 (f16 in, f32 accumulate),
//             in k order (split: within a split, then the splits in z order: the same bits for any finishing
//             order). Within a 16-value half, k is permuted identically for A and B: values 4t..4t+3 of the
//             int8 pack feed fragment positions 2t, 2t+1, 2t+8, 2t+9. (A block's scale folded into f16
//             weights lets the tensor cores sum all of k: the f32 per-block epilogue it replaces took more
//             issue slots than the mma; benches/notes/cuda.md, v22.)

#if FORMAT_QUANTIZED

// MMA_B_F16 decoders (NF4) give f16 fragments themselves (levels_b, intn.cuh) from a per-block table (LEVELS).
#ifndef MMA_B_F16
#define MMA_B_F16 0
#endif
#ifndef LEVELS
#define LEVELS 0
#endif

#define MMA_BN 128
#define MMA_THREADS 128                            // 4 warps, each BM rows × 32 weight rows; one thread per weight row
#define MMA_KB 2                                   // 32-value blocks of k per step (per stage, per barrier)
#define MMA_STAGES 2                               // 2 × ≤ 23.6 KB of static shared memory at BM 64 (of 48 KB)
#define X_STRIDE (64 * MMA_KB + 16)                // bytes per x row in shared memory: the step's halves + 16 padding
#define W_ROW (MMA_KB * QS_BYTES)                  // quant bytes of a weight row per step
#define W_STRIDE (W_ROW % 32 == 0 ? W_ROW + 16 : W_ROW)  // a warp's fragment loads hit 32 banks
#define W_PIECE (QS_BYTES < 16 ? QS_BYTES : 16)    // bytes per async copy of quants
#define QH_WORDS (QH_BYTES > 4 ? QH_BYTES / 4 : 1)

template <int BM>  // activation rows per tile: 64, or 32 for small batches (matmul_mma_split32)
struct __align__(16) MmaStage {
    u8 x[BM * X_STRIDE];                // f16 activations, MMA_KB blocks per row (each permuted, see Layout)
    u8 w[MMA_BN * W_STRIDE];            // raw quant bytes, MMA_KB blocks per weight row
    uint4 wscale[MMA_KB][MMA_BN];       // f16x2 (s0, s0), (s1, s1), (m0, m0), (m1, m1) per block and weight row
    u32 wqh[QH_BYTES ? MMA_KB * MMA_BN * QH_WORDS : 1];  // high bits (QH_BYTES formats), [block][row]
};

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// Copies N bytes global → shared without blocking; copies zeros instead when !pred (src is not read).
template <int N>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool pred) {
    const int n = pred ? N : 0;
    if (N == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)), "l"(src), "n"(N),
                     "r"(n));
    }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The A fragment (16 × 16 f16, row-major) whose row 0, column 0 is at p: lanes 0-15 address rows 0-15 of the
// left 8 columns, lanes 16-31 the right 8.
__device__ __forceinline__ void ldmatrix_x4(u32 a[4], const u8* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(smem_addr(p)));
}

// d[0..4] += A (16×16 f16, fragment a) · B (16×8 f16, column fragment b), f32 accumulate.
__device__ __forceinline__ void mma_f16(float d[4], const u32 a[4], const u32 b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four int8 (one word) → two f16x2 words, exactly: half bits 0x6400 | (v + 128) = 1024 + v + 128, minus 1152.
__device__ __forceinline__ void i8x4_to_f16(u32 p, u32& lo, u32& hi) {
    const u32 u = p ^ 0x80808080u, magic = 0x64646464u, bias = 0x64806480u;
    asm("prmt.b32 %0, %1, %2, 0x4140;" : "=r"(lo) : "r"(u), "r"(magic));
    asm("prmt.b32 %0, %1, %2, 0x4342;" : "=r"(hi) : "r"(u), "r"(magic));
    asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(lo) : "r"(bias));
    asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(hi) : "r"(bias));
}

// q · s + m per f16 lane, one rounding.
__device__ __forceinline__ u32 hfma2(u32 q, u32 s, u32 m) {
    u32 r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(q), "r"(s), "r"(m));
    return r;
}

// f as f16 in both halves (round to nearest even).
__device__ __forceinline__ u32 f16x2_splat(float f) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(f));
    return r;
}

// Where value v of a 16-value group sits in xh (the fragment order of the weights' decode, see Layout).
__device__ __forceinline__ u32 mma_x_position(u32 v) { return 2 * (v >> 2) + (v & 1) + 8 * ((v >> 1) & 1); }

// xh = f16(x), each 16-value group permuted (mma_x_position).    x: f32 [total], total a multiple of 32
extern "C" __global__ void matmul_mma_prep(const float* x, u16* xh, u64 total) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) xh[(i & ~15ull) | mma_x_position(i & 15)] = f32_to_f16(x[i]);
}

// Where this thread's copies of a tile come from: each piece's source at k-block 0 of the tile and its place
// in a stage, worked out once per tile so the k loop only adds the k-block's offset. A row past m or n
// (its bit clear in `ok`) copies zeros and reads nothing (its source stays the array's start).
constexpr u32 MMA_W_PIECES = W_ROW / W_PIECE;  // per weight row: MMA_BN rows (= MMA_THREADS) × this
template <int BM>
struct MmaSrc {
    const u8* x[BM * MMA_KB / 32];  // BM rows × 4 · MMA_KB pieces of 16 bytes over MMA_THREADS threads
    u32 x_at[BM * MMA_KB / 32];
    const u8* w[MMA_W_PIECES];
    u32 w_at[MMA_W_PIECES];
    const u8* qh;
    u32 ok;  // bits: x pieces from 0, weight pieces from 8, qh at 16
};
template <int BM>
__device__ __forceinline__ MmaSrc<BM> mma_src(const u8* qs, const u8* qh, const u8* xh, u32 m, u32 n, u32 k, u32 m0,
                                              u32 n0) {
    MmaSrc<BM> src;
    src.ok = 0;
    const u32 tid = threadIdx.x, nb = k / 32;
#pragma unroll
    for (u32 p = 0; p < BM * MMA_KB / 32; p++) {
        const u32 i = tid + p * MMA_THREADS, r = i / (4 * MMA_KB), h = i % (4 * MMA_KB);
        const bool ok = m0 + r < m;
        src.x[p] = xh + (ok ? (u64)(m0 + r) * k * 2 + 16 * h : 0);
        src.ok |= (u32)ok << p;
        src.x_at[p] = r * X_STRIDE + 16 * h;
    }
#pragma unroll
    for (u32 p = 0; p < MMA_W_PIECES; p++) {
        const u32 i = tid + p * MMA_THREADS, r = i / MMA_W_PIECES, h = i % MMA_W_PIECES;
        const bool ok = n0 + r < n;
        src.w[p] = qs + (ok ? (u64)(n0 + r) * nb * QS_BYTES + W_PIECE * h : 0);
        src.ok |= (u32)ok << (8 + p);
        src.w_at[p] = r * W_STRIDE + W_PIECE * h;
    }
    const bool ok = n0 + tid < n;
    src.qh = qh + (ok ? (u64)(n0 + tid) * nb * QH_BYTES : 0);
    src.ok |= (u32)ok << 16;
    return src;
}

// Queues this thread's copies of the step from k-block kb (`live` of its MMA_KB blocks in range; the others
// are zeros) into stage s.
template <int BM>
__device__ __forceinline__ void mma_load(MmaStage<BM>& s, const MmaSrc<BM>& src, u32 kb, u32 live) {
#pragma unroll
    for (u32 p = 0; p < BM * MMA_KB / 32; p++) {
        const u32 block = (src.x_at[p] % X_STRIDE) / 64;  // which of the step's blocks this piece is in
        const bool ok = (src.ok >> p & 1) && block < live;
        cp_async<16>(s.x + src.x_at[p], src.x[p] + (ok ? kb * 64 : 0), ok);
    }
#pragma unroll
    for (u32 p = 0; p < MMA_W_PIECES; p++) {
        const u32 block = (src.w_at[p] % W_STRIDE) / QS_BYTES;
        const bool ok = (src.ok >> (8 + p) & 1) && block < live;
        cp_async<W_PIECE>(s.w + src.w_at[p], src.w[p] + (ok ? kb * QS_BYTES : 0), ok);
    }
#if QH_BYTES
#pragma unroll
    for (u32 b = 0; b < MMA_KB; b++) {
        const bool ok = (src.ok >> 16 & 1) && b < live;
        cp_async<QH_BYTES>(&s.wqh[(b * MMA_BN + threadIdx.x) * QH_WORDS], src.qh + (ok ? (kb + b) * QH_BYTES : 0), ok);
    }
#endif
}

// Scales are not copied raw: thread r (one per weight row) loads row r's SC_BYTES per block into registers
// when a step's copies are queued (mma_rec_load), and after the current step's mma decodes them once into the
// stage as f16 (mma_rec_store), so the lanes read 16 bytes per weight row instead of each decoding the
// record (a k-quant's takes ~20 instructions) and the loads' latency hides behind a step.
struct MmaRec {
    u32 w[MMA_KB][SC_BYTES / 4];
};
__device__ __forceinline__ MmaRec mma_rec_load(const u8* dm, u32 n, u32 nb, u32 n0, u32 kb, u32 live) {
    MmaRec rec;
    const u32 r = threadIdx.x;
#pragma unroll
    for (u32 b = 0; b < MMA_KB; b++) {
        const bool ok = b < live && n0 + r < n;
        const u32* src = (const u32*)(dm + (ok ? sc_offset((u64)(n0 + r) * nb + kb + b) : 0));
#pragma unroll
        for (int i = 0; i < SC_BYTES / 4; i++) rec.w[b][i] = ok ? src[i] : 0u;
    }
    return rec;
}
// A block past the step's live ones gets scale and min 0 (its zero quants then weigh nothing).
template <int BM>
__device__ __forceinline__ void mma_rec_store(MmaStage<BM>& s, const MmaRec& rec, u32 nb, u32 n0, u32 kb, u32 live) {
#pragma unroll
    for (u32 b = 0; b < MMA_KB; b++) {
        const u64 blk = (u64)(n0 + threadIdx.x) * nb + kb + b;
        const float4 v = b < live ? mma_scale(rec.w[b], blk) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        s.wscale[b][threadIdx.x] = make_uint4(f16x2_splat(v.x), f16x2_splat(v.y), f16x2_splat(v.z), f16x2_splat(v.w));
    }
}

// Split-K epilogue: stores this split's tile in partial; the tile's last split to finish adds all of them
// in z order into dst (the others' stores are fenced before they are counted, read back through L2).
// (MT: m tiles per warp; z, splits: this block's split and the count; tile: the tile's counter in done.)
template <int MT>
__device__ void mma_split_store(float acc[MT][4][4], float* partial, u32* done, float* dst, u32 m, u32 n, u32 m0,
                                u32 n0, u32 wn, u32 g, u32 t, u32 z, u32 splits, u32 tile) {
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = m0 + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
                if (rr < m && cc < n) partial[((u64)z * m + rr) * n + cc] = acc[i][j][e];
            }
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&done[tile], 1u) == splits - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (threadIdx.x == 0) done[tile] = 0;  // zero again for the next launch (or graph replay)
    // Splits outer, elements inner: each split's loads of this thread are in flight together, so the
    // sum takes `splits` L2 round trips, not 16 · MT · splits one after another (benches/notes/cuda.md, v14).
    // Each element still adds the splits in z order from 0.0f: the same bits as one element at a time.
    // This block's own split is read back too (exactly what it stored), so acc's registers are free here.
    float sum[MT][4][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) sum[i][j][e] = 0.0f;
    for (u32 s = 0; s < splits; s++) {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const u32 rr = m0 + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
                    const bool in = rr < m && cc < n;
                    sum[i][j][e] += in ? __ldcg(&partial[((u64)s * m + rr) * n + cc]) : 0.0f;
                }
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = m0 + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
                if (rr < m && cc < n) dst[(u64)rr * n + cc] = sum[i][j][e];
            }
}

// Which output tile a block computes: tile (tx, ty) of the n × m grid, split z of `splits`; `tile` its
// counter in done. The plain launches take it from the grid (mma_at_grid), matmul_mma_parts from its part.
struct MmaAt {
    u32 tx, ty, z, splits, tile;
};
__device__ __forceinline__ MmaAt mma_at_grid() {
    return {blockIdx.x, blockIdx.y, blockIdx.z, gridDim.z, blockIdx.y * gridDim.x + blockIdx.x};
}

// One k-block's products of a warp: its BM / 16 m tiles × 4 n tiles of 8 weight rows from column wn, both
// 16-value halves. Each weight fragment is decoded, scaled to f16 weights and used for every m tile.
template <int BM>
__device__ __forceinline__ void mma_step(const MmaStage<BM>& s, u32 kbs, float acc[BM / 16][4][4], u32 wn,
                                         u32 lane) {
    constexpr int MT = BM / 16;
    const u32 g = lane >> 2, t = lane & 3;
    u32 a[MT][2][4];  // [m tile][half]: rows 16i.., values 16·half.. (permuted, see Layout)
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            ldmatrix_x4(a[i][h], s.x + (16 * i + (lane & 15)) * X_STRIDE + 64 * kbs + 32 * h + 16 * (lane >> 4));
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const u32 c = wn + 8 * j + g;  // this lane's weight row (the B fragment's column)
        u32 b[2][2];                   // [half][values 4t, 4t + 1 | 4t + 2, 4t + 3]
#if MMA_B_F16
        levels_b(s.w + c * W_STRIDE + kbs * QS_BYTES, t, b);
#else
        u32 p0, p1;
        mma_b(s.w + c * W_STRIDE + kbs * QS_BYTES, &s.wqh[(kbs * MMA_BN + c) * QH_WORDS], t, p0, p1);
        i8x4_to_f16(p0, b[0][0], b[0][1]);
        i8x4_to_f16(p1, b[1][0], b[1][1]);
#endif
        const uint4 sc = s.wscale[kbs][c];  // (s0, s1, m0, m1) as f16x2 splats
#pragma unroll
        for (int e = 0; e < 2; e++) {
            b[0][e] = hfma2(b[0][e], sc.x, sc.z);
            b[1][e] = hfma2(b[1][e], sc.y, sc.w);
        }
#pragma unroll
        for (int i = 0; i < MT; i++) {
            mma_f16(acc[i][j], a[i][0], b[0]);
            mma_f16(acc[i][j], a[i][1], b[1]);
        }
    }
}

// The tile loop over k-blocks [kb0, kb0 + nb) of nb_all in the kernel's shared `stages`; SPLIT: finished
// by mma_split_store. MMA_THREADS threads: 4 warps along n, each all BM rows × 32 weight rows.
template <bool SPLIT, int BM>
__device__ __forceinline__ void mma_tile(MmaStage<BM>* stages, const u8* qs, const u8* qh, const u8* dm,
                                         const u8* xh, float* dst, float* partial, u32* done, u32 m, u32 n, u32 k,
                                         MmaAt at) {
    constexpr int MT = BM / 16;
    const u32 lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const u32 m0 = at.ty * BM, n0 = at.tx * MMA_BN, wn = (threadIdx.x >> 5) * 32;
    const u32 nb_all = k / 32, per = SPLIT ? (nb_all + at.splits - 1) / at.splits : nb_all;
    // This split's k-blocks (the host leaves no split empty).
    const u32 kb0 = SPLIT ? at.z * per : 0, nb = SPLIT ? min(per, nb_all - min(nb_all, kb0)) : nb_all;
#if LEVELS
    levels_init();  // read only after the main loop's first barrier
#endif
    const MmaSrc<BM> src = mma_src<BM>(qs, qh, xh, m, n, k, m0, n0);
    float acc[MT][4][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    // Steps of MMA_KB blocks; the last one may hold fewer (`live`).
    const u32 steps = (nb + MMA_KB - 1) / MMA_KB;
    const auto live = [&](u32 st) { return min((u32)MMA_KB, nb - min(nb, st * MMA_KB)); };
#pragma unroll
    for (u32 s = 0; s < MMA_STAGES - 1; s++) {
        if (s < steps) {
            const u32 kb = kb0 + s * MMA_KB;
            mma_load(stages[s], src, kb, live(s));
            mma_rec_store(stages[s], mma_rec_load(dm, n, nb_all, n0, kb, live(s)), nb_all, n0, kb, live(s));
        }
        cp_async_commit();
    }
    for (u32 st = 0; st < steps; st++) {
        cp_async_wait<MMA_STAGES - 2>();  // step st has landed (this thread's copies) ...
        __syncthreads();                  // ... everyone's, and stage (st - 1) % STAGES is free again
        const u32 next = st + MMA_STAGES - 1, next_kb = kb0 + next * MMA_KB, next_live = next < steps ? live(next) : 0;
        if (next < steps) mma_load(stages[next % MMA_STAGES], src, next_kb, next_live);
        cp_async_commit();
        // Stored after this step's mma; read at the next barrier or later (no one reads that stage before it).
        const MmaRec rec = mma_rec_load(dm, n, nb_all, n0, next_kb, next_live);
#pragma unroll
        for (u32 kbs = 0; kbs < MMA_KB; kbs++) mma_step<BM>(stages[st % MMA_STAGES], kbs, acc, wn, lane);
        if (next < steps) mma_rec_store(stages[next % MMA_STAGES], rec, nb_all, n0, next_kb, next_live);
    }
    cp_async_wait<0>();
    if (SPLIT) {
        mma_split_store<MT>(acc, partial, done, dst, m, n, m0, n0, wn, g, t, at.z, at.splits, at.tile);
        return;
    }

#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 r = m0 + 16 * i + g, c = n0 + wn + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = r + (e >> 1) * 8, cc = c + (e & 1);
                if (rr < m && cc < n) dst[(u64)rr * n + cc] = acc[i][j][e];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma(const u8* qs, const u8* qh, const u8* dm, const u8* xh, float* dst, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ MmaStage<64> stages[MMA_STAGES];
    mma_tile<false, 64>(stages, qs, qh, dm, xh, dst, nullptr, nullptr, m, n, k, mma_at_grid());
}

extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma_split(const u8* qs, const u8* qh, const u8* dm, const u8* xh, float* dst, float* partial, u32* done,
                     u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ MmaStage<64> stages[MMA_STAGES];
    mma_tile<true, 64>(stages, qs, qh, dm, xh, dst, partial, done, m, n, k, mma_at_grid());
}

// Small batches (decode of a few dozen sequences): a 32-row tile, so 32 rows leave no half of it empty.
extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma_split32(const u8* qs, const u8* qh, const u8* dm, const u8* xh, float* dst, float* partial,
                       u32* done, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ MmaStage<32> stages[MMA_STAGES];
    mma_tile<true, 32>(stages, qs, qh, dm, xh, dst, partial, done, m, n, k, mma_at_grid());
}

// A batch of up to 32 rows whose tiles fill the GPU unsplit (the vocabulary matrix): a 64-row tile would
// spend half of its mma on rows past m.
extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma32(const u8* qs, const u8* qh, const u8* dm, const u8* xh, float* dst, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ MmaStage<32> stages[MMA_STAGES];
    mma_tile<false, 32>(stages, qs, qh, dm, xh, dst, nullptr, nullptr, m, n, k, mma_at_grid());
}

// Up to 3 products of one x in one launch (q, k, v; gate, up): part p is weight (qs, qh, dm)[p] of n[p]
// rows split splits[p] ways (every part split, or every part whole: matmul_mma_parts_whole), its blocks a
// run of the 1-D grid in (z, y, x) order, as its own launch's grid; its partials at partial +
// Σ_{q<p} splits[q] · m · n[q], its counters after the earlier parts' tiles. Each block computes what it
// would in that part's own launch (matmul_mma_split(32), or matmul_mma): the same bits, with the small
// parts' under-filled waves joined to the big one's.
struct MmaParts {
    const u8* qs[3];
    const u8* qh[3];
    const u8* dm[3];
    float* dst[3];
    u32 n[3], splits[3];
};
template <bool SPLIT, int BM>
__device__ __forceinline__ void mma_parts(const MmaParts& ps, const u8* xh, float* partial, u32* done, u32 m,
                                          u32 k) {
    const u32 tiles_m = (m + BM - 1) / BM;
    u32 b = blockIdx.x, tile0 = 0, p = 0;
    u64 part0 = 0;
#pragma unroll
    for (u32 q = 0; q < 2; q++) {  // find this block's part: p, its first counter and partial
        const u32 blocks = (ps.n[q] + MMA_BN - 1) / MMA_BN * tiles_m * ps.splits[q];
        if (p == q && b >= blocks) {
            b -= blocks;
            tile0 += blocks / ps.splits[q];
            part0 += (u64)ps.splits[q] * m * ps.n[q];
            p = q + 1;
        }
    }
    const u32 n = ps.n[p], splits = ps.splits[p], tiles_n = (n + MMA_BN - 1) / MMA_BN, tiles = tiles_n * tiles_m;
    if (b >= tiles * splits) return;  // past the last part (the host's grid is exact)
    const u32 z = b / tiles, ty = b % tiles / tiles_n, tx = b % tiles_n;
    __shared__ MmaStage<BM> stages[MMA_STAGES];
    mma_tile<SPLIT, BM>(stages, ps.qs[p], ps.qh[p], ps.dm[p], xh, ps.dst[p], partial + part0, done + tile0, m, n, k,
                        {tx, ty, z, splits, ty * tiles_n + tx});
}
extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma_parts(const MmaParts ps, const u8* xh, float* partial, u32* done, u32 m, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_parts<true, 64>(ps, xh, partial, done, m, k);
}
extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma_parts32(const MmaParts ps, const u8* xh, float* partial, u32* done, u32 m, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_parts<true, 32>(ps, xh, partial, done, m, k);
}
// Unsplit parts (prefill): each block as matmul_mma's; partial and done unused.
extern "C" __global__ void __launch_bounds__(MMA_THREADS, 3)
    matmul_mma_parts_whole(const MmaParts ps, const u8* xh, float* partial, u32* done, u32 m, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_parts<false, 64>(ps, xh, partial, done, m, k);
}

#endif
