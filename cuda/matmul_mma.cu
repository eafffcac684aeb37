// matmul_mma  dst[m, n] = Σ_blocks b (s_w · Σ_{j∈b} q_w x_j + m_w · Σ_{j∈b} x_j)    (m > 8, quantized weights)
//             body joined after one quantized format decoder (matmul_<format>.cu: mma_b, mma_scale, sc_offset,
//             QS_BYTES, QH_BYTES, SC_BYTES, HAS_M, SUB16, XSUM_HALVES)
// Layout      xh f16 [m][k] + xsum f32 [m][k/32] (per 16 values, [m][k/16], when XSUM_HALVES) from
//             matmul_mma_prep; weights as uploaded: qs QS_BYTES and qh QH_BYTES per 32-value block, and
//             SC_BYTES of scales per block from dm at sc_offset (a legacy block's d / (d, m) word, a
//             k-quant super-block's scale record)
// Launch      matmul_mma_prep: one thread per value, one warp per block. matmul_mma: grid (ceil(n / 128),
//             ceil(m / 64)), 256 threads = 8 warps, each 32 rows × 32 columns of the 64 × 128 output tile
//             (2 warps along m × 4 along n). matmul_mma_split (split-K, for small m whose tiles would not fill
//             the GPU; matmul_mma_split32 the same with a 32 × 128 tile, 4 warps, grid.y ceil(m / 32)): grid.z = splits, split z takes k-blocks [z · per, (z + 1) · per), per = ceil(nb /
//             splits), writes its tile to partial [splits][m][n], and the last of a tile's splits to finish
//             (a counter per tile in done, zero between launches) sums them in z order into dst.
//             k in steps of one 32-value block, raw blocks copied into shared
//             memory by cp.async MMA_STAGES deep; weight quants decoded per fragment to exact f16 integers,
//             weight scales once per row and step into the stage (mma_rec_load / mma_rec_store)
// Numerics    x rounded once to f16 (the only rounding before f32); q_w exact in f16; each block's
//             Σ q_w x_j by two mma.sync m16n8k16 (f16 in, f32 accumulate), one per 16-value half, scaled
//             in f32 by the decoder's (s0, s1, m0, m1) (SUB16: a scale per half) and summed in k order
//             (split: within a split, then the splits in z order: the same bits for any finishing order).
//             (Within a block, k is permuted identically for A and B: values 4t..4t+3 of the int8 pack
//             feed fragment positions 2t, 2t+1, 2t+8, 2t+9.)

#if FORMAT_QUANTIZED

// MMA_B_F16 decoders (NF4) give f16 fragments themselves (levels_b, intn.cuh) from a per-block table (LEVELS).
#ifndef MMA_B_F16
#define MMA_B_F16 0
#endif
#ifndef LEVELS
#define LEVELS 0
#endif

#define MMA_BN 128
#define MMA_STAGES (QS_BYTES == 32 ? 3 : 4)       // 3 × 12.5 KB or 4 × ≤ 11 KB of static shared memory
#define X_STRIDE 80                                // bytes per x row in shared memory: 32 halves + 16 padding
#define W_STRIDE (QS_BYTES == 32 ? 48 : QS_BYTES)  // 12, 4 or 2 words: a warp's fragment loads hit 32 banks
#define W_PIECE (QS_BYTES < 16 ? QS_BYTES : 16)    // bytes per async copy of quants
#define QH_WORDS (QH_BYTES > 4 ? QH_BYTES / 4 : 1)
#define XSUMS (XSUM_HALVES ? 2 : 1)               // sums of x per block and row

template <int BM>  // activation rows per tile: 64, or 32 for small batches (matmul_mma_split32)
struct __align__(16) MmaStage {
    u8 x[BM * X_STRIDE];                // f16 activations, one block per row
    u8 w[MMA_BN * W_STRIDE];            // raw quant bytes, one block per weight row
    float xsum[BM * XSUMS];             // Σ x over the block (or each half), per row (HAS_M formats)
    float4 wscale[MMA_BN];              // (s0, s1, m0, m1) of the block, per weight row (mma_scale)
    u32 wqh[MMA_BN * QH_WORDS];         // high bits (QH_BYTES formats)
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

// d[0..4] += A (16×16 f16, row-major fragment a) · B (16×8 f16, column fragment b0, b1), f32 accumulate.
__device__ __forceinline__ void mma_f16(float d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four int8 (one word) → two f16x2 words, exactly: half bits 0x6400 | (v + 128) = 1024 + v + 128, minus 1152.
__device__ __forceinline__ void i8x4_to_f16(u32 p, u32& lo, u32& hi) {
    const u32 u = p ^ 0x80808080u, magic = 0x64646464u, bias = 0x64806480u;
    asm("prmt.b32 %0, %1, %2, 0x4140;" : "=r"(lo) : "r"(u), "r"(magic));
    asm("prmt.b32 %0, %1, %2, 0x4342;" : "=r"(hi) : "r"(u), "r"(magic));
    asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(lo) : "r"(bias));
    asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(hi) : "r"(bias));
}

// xh = f16(x), xsum[b] = Σ x over block b (32 values; 16 when XSUM_HALVES).    x: f32 [total], total a multiple of 32
extern "C" __global__ void matmul_mma_prep(const float* x, u16* xh, float* xsum, u64 total) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= total) return;  // whole warps leave together
    const float v = i < total ? x[i] : 0.0f;
    constexpr u32 span = XSUM_HALVES ? 16 : 32;
    float s = v;
#pragma unroll
    for (u32 o = span / 2; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
    if (i < total) xh[i] = f32_to_f16(v);
    if ((i & (span - 1)) == 0) xsum[i / span] = s;
}

// Queues the copies of k-block kb of the tile (rows m0.., weight rows n0..) into stage s; 4 · BM threads.
template <int BM>
__device__ __forceinline__ void mma_load(MmaStage<BM>& s, const u8* qs, const u8* qh, const u8* dm, const u8* xh,
                                         const float* xsum, u32 m, u32 n, u32 k, u32 m0, u32 n0, u32 kb) {
    const u32 tid = threadIdx.x, nb = k / 32;
    {
        const u32 r = tid >> 2, h = tid & 3;  // BM rows × 4 pieces of 16 bytes
        const bool ok = m0 + r < m;
        cp_async<16>(s.x + r * X_STRIDE + 16 * h, xh + (ok ? ((u64)(m0 + r) * k + kb * 32) * 2 + 16 * h : 0), ok);
    }
#if HAS_M
    if (tid < BM) {
        const bool ok = m0 + tid < m;
        cp_async<4 * XSUMS>(&s.xsum[tid * XSUMS], xsum + (ok ? ((u64)(m0 + tid) * nb + kb) * XSUMS : 0), ok);
    }
#endif
    constexpr u32 w_pieces = QS_BYTES / W_PIECE;
#pragma unroll
    for (u32 i = tid; i < MMA_BN * w_pieces; i += 4 * BM) {
        const u32 r = i / w_pieces, h = i % w_pieces;
        const bool ok = n0 + r < n;
        const u64 blk = (u64)(n0 + r) * nb + kb;
        cp_async<W_PIECE>(s.w + r * W_STRIDE + W_PIECE * h, qs + (ok ? blk * QS_BYTES + W_PIECE * h : 0), ok);
    }
#if QH_BYTES
    if (tid < MMA_BN) {
        const bool ok = n0 + tid < n;
        cp_async<QH_BYTES>(&s.wqh[tid * QH_WORDS], qh + (ok ? ((u64)(n0 + tid) * nb + kb) * QH_BYTES : 0), ok);
    }
#endif
}

// Scales are not copied raw: thread r < MMA_BN loads weight row r's SC_BYTES into registers when
// block kb's copies are queued (mma_rec_load), and after that step's mma decodes them once into the
// stage (mma_rec_store), so the lanes read a float4 per column instead of each decoding the record
// (a k-quant's takes ~20 instructions; 8 per lane and step) and the loads' latency hides behind a step.
struct MmaRec {
    u32 w[SC_BYTES / 4];
};
__device__ __forceinline__ MmaRec mma_rec_load(const u8* dm, u32 n, u32 nb, u32 n0, u32 kb, bool live) {
    MmaRec rec;
    const u32 r = threadIdx.x;
    const bool ok = live && r < MMA_BN && n0 + r < n;
    const u32* src = (const u32*)(dm + (ok ? sc_offset((u64)(n0 + r) * nb + kb) : 0));
#pragma unroll
    for (int i = 0; i < SC_BYTES / 4; i++) rec.w[i] = ok ? src[i] : 0u;
    return rec;
}
template <int BM>
__device__ __forceinline__ void mma_rec_store(MmaStage<BM>& s, const MmaRec& rec, u32 nb, u32 n0, u32 kb) {
    const u32 r = threadIdx.x;
    if (r < MMA_BN) s.wscale[r] = mma_scale(rec.w, (u64)(n0 + r) * nb + kb);
}

// Split-K epilogue: stores this split's tile in partial; the tile's last split to finish adds all of them
// in z order into dst (the others' stores are fenced before they are counted, read back through L2).
// (z, splits: this block's split and the count; tile: the tile's counter in done.)
__device__ void mma_split_store(float acc[2][4][4], float* partial, u32* done, float* dst, u32 m, u32 n, u32 m0,
                                u32 n0, u32 wm, u32 wn, u32 g, u32 t, u32 z, u32 splits, u32 tile) {
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = m0 + wm + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
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
    // Splits outer, elements inner: each split's 32 loads of this thread are in flight together, so the
    // sum takes `splits` L2 round trips, not 32 · splits one after another (benches/notes/cuda.md, v14).
    // Each element still adds the splits in z order from 0.0f: the same bits as one element at a time.
    float sum[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) sum[i][j][e] = 0.0f;
    for (u32 s = 0; s < splits; s++) {
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const u32 rr = m0 + wm + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
                    const bool in = rr < m && cc < n;
                    const float* p = &partial[((u64)s * m + rr) * n + cc];
                    sum[i][j][e] += s == z ? acc[i][j][e] : (in ? __ldcg(p) : 0.0f);
                }
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = m0 + wm + 16 * i + g + (e >> 1) * 8, cc = n0 + wn + 8 * j + 2 * t + (e & 1);
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

// The tile loop over k-blocks [kb0, kb0 + nb) of nb_all; SPLIT: finished by mma_split_store. 4 · BM
// threads: warps 2 (BM 64) or 1 (BM 32) along m × 4 along n, each 32 rows × 32 columns.
template <bool SPLIT, int BM>
__device__ __forceinline__ void mma_tile(const u8* qs, const u8* qh, const u8* dm, const u8* xh, const float* xsum,
                                         float* dst, float* partial, u32* done, u32 m, u32 n, u32 k, MmaAt at) {
    __shared__ MmaStage<BM> stages[MMA_STAGES];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const u32 m0 = at.ty * BM, n0 = at.tx * MMA_BN;
    const u32 wm = (warp >> 2) * 32, wn = (warp & 3) * 32;
    const u32 nb_all = k / 32, per = SPLIT ? (nb_all + at.splits - 1) / at.splits : nb_all;
    // This split's k-blocks (the host leaves no split empty).
    const u32 kb0 = SPLIT ? at.z * per : 0, nb = SPLIT ? min(per, nb_all - min(nb_all, kb0)) : nb_all;
#if LEVELS
    levels_init();  // read only after the main loop's first barrier
#endif
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
    for (u32 s = 0; s < MMA_STAGES - 1; s++) {
        if (s < nb) {
            mma_load(stages[s], qs, qh, dm, xh, xsum, m, n, k, m0, n0, kb0 + s);
            mma_rec_store(stages[s], mma_rec_load(dm, n, nb_all, n0, kb0 + s, true), nb_all, n0, kb0 + s);
        }
        cp_async_commit();
    }
    for (u32 kb = 0; kb < nb; kb++) {
        cp_async_wait<MMA_STAGES - 2>();  // block kb has landed (this thread's copies) ...
        __syncthreads();                  // ... everyone's, and stage (kb - 1) % STAGES is free again
        const u32 next = kb + MMA_STAGES - 1;
        if (next < nb) mma_load(stages[next % MMA_STAGES], qs, qh, dm, xh, xsum, m, n, k, m0, n0, kb0 + next);
        cp_async_commit();
        // Stored after this step's mma; read MMA_STAGES - 1 ≥ 2 barriers later.
        const MmaRec rec = mma_rec_load(dm, n, nb_all, n0, kb0 + next, next < nb);

        const MmaStage<BM>& s = stages[kb % MMA_STAGES];
        // A fragments of both k16 halves of the block: row r, values 4t..4t+3 (step 0) and 16+4t.. (step 1).
        uint2 a[2][2][2];  // [m tile][step][row g, row g + 8]
#if HAS_M
        float xs[2][2][XSUMS];  // [m tile][row g, row g + 8][half]
#endif
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u32 r = wm + 16 * i + g;
            const u8* xr = s.x + r * X_STRIDE + 8 * t;
#pragma unroll
            for (int st = 0; st < 2; st++) {
                a[i][st][0] = *(const uint2*)(xr + 32 * st);
                a[i][st][1] = *(const uint2*)(xr + 8 * X_STRIDE + 32 * st);
            }
#if HAS_M
#pragma unroll
            for (int h = 0; h < XSUMS; h++) {
                xs[i][0][h] = s.xsum[r * XSUMS + h];
                xs[i][1][h] = s.xsum[(r + 8) * XSUMS + h];
            }
#endif
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 c = wn + 8 * j;
            u32 b[2][2];
#if MMA_B_F16
            levels_b(s.w + (c + g) * W_STRIDE, t, b);
#else
            u32 p0, p1;
            mma_b(s.w + (c + g) * W_STRIDE, &s.wqh[(c + g) * QH_WORDS], t, p0, p1);
            i8x4_to_f16(p0, b[0][0], b[0][1]);
            i8x4_to_f16(p1, b[1][0], b[1][1]);
#endif
            // This lane's two output columns c + 2t, c + 2t + 1: (s0, s1, m0, m1) of each.
            const u32 c0 = c + 2 * t;
            const float4 w0 = s.wscale[c0], w1 = s.wscale[c0 + 1];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float d0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                mma_f16(d0, a[i][0][0].x, a[i][0][1].x, a[i][0][0].y, a[i][0][1].y, b[0][0], b[0][1]);
                mma_f16(SUB16 ? d1 : d0, a[i][1][0].x, a[i][1][1].x, a[i][1][0].y, a[i][1][1].y, b[1][0], b[1][1]);
                acc[i][j][0] += w0.x * d0[0];
                acc[i][j][1] += w1.x * d0[1];
                acc[i][j][2] += w0.x * d0[2];
                acc[i][j][3] += w1.x * d0[3];
#if SUB16
                acc[i][j][0] += w0.y * d1[0];
                acc[i][j][1] += w1.y * d1[1];
                acc[i][j][2] += w0.y * d1[2];
                acc[i][j][3] += w1.y * d1[3];
#endif
#if HAS_M
                acc[i][j][0] += w0.z * xs[i][0][0];
                acc[i][j][1] += w1.z * xs[i][0][0];
                acc[i][j][2] += w0.z * xs[i][1][0];
                acc[i][j][3] += w1.z * xs[i][1][0];
#if XSUM_HALVES
                acc[i][j][0] += w0.w * xs[i][0][1];
                acc[i][j][1] += w1.w * xs[i][0][1];
                acc[i][j][2] += w0.w * xs[i][1][1];
                acc[i][j][3] += w1.w * xs[i][1][1];
#endif
#endif
            }
        }
        if (next < nb) mma_rec_store(stages[next % MMA_STAGES], rec, nb_all, n0, kb0 + next);
    }
    cp_async_wait<0>();
    if (SPLIT) {
        mma_split_store(acc, partial, done, dst, m, n, m0, n0, wm, wn, g, t, at.z, at.splits, at.tile);
        return;
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 r = m0 + wm + 16 * i + g, c = n0 + wn + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const u32 rr = r + (e >> 1) * 8, cc = c + (e & 1);
                if (rr < m && cc < n) dst[(u64)rr * n + cc] = acc[i][j][e];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    matmul_mma(const u8* qs, const u8* qh, const u8* dm, const u8* xh, const float* xsum, float* dst, u32 m, u32 n,
               u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_tile<false, 64>(qs, qh, dm, xh, xsum, dst, nullptr, nullptr, m, n, k, mma_at_grid());
}

extern "C" __global__ void __launch_bounds__(256)
    matmul_mma_split(const u8* qs, const u8* qh, const u8* dm, const u8* xh, const float* xsum, float* dst,
                     float* partial, u32* done, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_tile<true, 64>(qs, qh, dm, xh, xsum, dst, partial, done, m, n, k, mma_at_grid());
}

// Small batches (decode of a few dozen sequences): a 32-row tile, so 32 rows leave no half of it empty.
extern "C" __global__ void __launch_bounds__(128)
    matmul_mma_split32(const u8* qs, const u8* qh, const u8* dm, const u8* xh, const float* xsum, float* dst,
                       float* partial, u32* done, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_tile<true, 32>(qs, qh, dm, xh, xsum, dst, partial, done, m, n, k, mma_at_grid());
}

// Up to 3 split products of one x in one launch (q, k, v; gate, up): part p is weight (qs, qh, dm)[p]
// of n[p] rows split splits[p] ways, its blocks a run of the 1-D grid in (z, y, x) order, as its own
// launch's grid; its partials at partial + Σ_{q<p} splits[q] · m · n[q], its counters after the earlier
// parts' tiles. Each block computes what it would in that part's own launch: the same bits.
struct MmaParts {
    const u8* qs[3];
    const u8* qh[3];
    const u8* dm[3];
    float* dst[3];
    u32 n[3], splits[3];
};
template <int BM>
__device__ __forceinline__ void mma_parts(const MmaParts& ps, const u8* xh, const float* xsum, float* partial,
                                          u32* done, u32 m, u32 k) {
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
    mma_tile<true, BM>(ps.qs[p], ps.qh[p], ps.dm[p], xh, xsum, ps.dst[p], partial + part0, done + tile0, m, n, k,
                       {tx, ty, z, splits, ty * tiles_n + tx});
}
extern "C" __global__ void __launch_bounds__(256) matmul_mma_parts(const MmaParts ps, const u8* xh, const float* xsum,
                                                                   float* partial, u32* done, u32 m, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_parts<64>(ps, xh, xsum, partial, done, m, k);
}
extern "C" __global__ void __launch_bounds__(128) matmul_mma_parts32(const MmaParts ps, const u8* xh,
                                                                     const float* xsum, float* partial, u32* done,
                                                                     u32 m, u32 k) {
    GRID_DEPENDENCY_WAIT();
    mma_parts<32>(ps, xh, xsum, partial, done, m, k);
}

#endif
