// matmul_mmq  dst[m, n] = Σ_blocks b d_w · (d_x · Σ_{j∈b} q_w xq_j + d2_x · Σ_{j∈b} q_w xq2_j)   (9 ≤ m ≤ 64)
//             body joined after a decoder with MMQ 1 (Q4_0, Q8_0: one f16 scale per 32-value block, no
//             min, no high bits): mma_b gives a block's int8 quants, mma_scale its d
// Layout      from matmul_mmq_prep, x quantized as the GEMV's two planes (quantize_q8_1.cu: x ≈ d · xq +
//             d2 · xq2 per block) and stored in mma fragment order for MT tiles of 8 rows (rows m.. MT · 8
//             zero): xf uint4 [k/32][MT][32 lanes] = (xq words t and t + 4, xq2 words t and t + 4) of row
//             8j + g (lane = 4g + t); xd float4 [k/32][MT · 4] = (d, d2 of row 2p, d, d2 of row 2p + 1)
// Launch      matmul_mmq_prep: one thread per value of MT · 8 rows, one warp per block.
//             matmul_mmq_tMT: grid (ceil(n / 128), splits), 128 threads = 4 warps, each 32 weight rows
//             (two m16 tiles) × all MT · 8 rows of x; split y takes k-blocks [y · per, (y + 1) · per),
//             per = ceil(nb / splits). The weights stream from global memory straight into registers (each
//             lane reads its 4-byte fragment words of 4 rows, MMQ_CHUNK blocks ahead); x's fragments go
//             through shared memory MMQ_CHUNK blocks at a time (cp.async, two buffers, one barrier per chunk),
//             so the block's 4 warps share one copy of them.
//             Split > 1: each split writes partial [splits][m][n], and the last of a column tile's splits
//             to finish (a counter per tile in done, zero between launches) sums them in y order into dst.
// Numerics    weights as the weights (q exact in int8), x as the GEMV's planes; each block's Σ q_w xq by one
//             mma.sync m16n8k32 s8 per plane (exact int32), scaled in f32 and summed in k order within a
//             split, then the splits in y order (the same bits for any finishing order, and for any m:
//             a row's result does not depend on the other rows of the call).

#ifndef MMQ
#define MMQ 0
#endif

#if MMQ

#define MMQ_WARPS 4
#define MMQ_BN (MMQ_WARPS * 32)
#define MMQ_CHUNK 4  // k-blocks per barrier (x's fragments through shared memory), and weight blocks in flight per lane

// d[0..4] += A (16×32 s8, row-major fragment a0..a3) · B (32×8 s8, column fragment b0, b1), s32 accumulate.
__device__ __forceinline__ void mma_s8(int d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x [m][k] f32 → xf, xd (layout above) for rows_p = MT · 8 rows; total = rows_p · k.
extern "C" __global__ void matmul_mmq_prep(const float* __restrict__ x, u8* __restrict__ xf,
                                           float* __restrict__ xd, u32 m, u32 k, u32 mt, u64 total) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= total) return;  // whole warps leave together
    const u32 row = (u32)(i / k), c = (u32)(i % k), kb = c / 32, v = c & 31;
    const float xv = (i < total && row < m) ? x[(u64)row * k + c] : 0.0f;
    float q, d, q2, d2;
    q8_1_split(xv, q, d, q2, d2);
    if (i >= total) return;
    const u32 j = row / 8, g = row % 8, t = (v & 15) / 4, half = v / 16, byte = v & 3;
    u8* frag = xf + (((u64)kb * mt + j) * 32 + 4 * g + t) * 16;
    frag[half * 4 + byte] = (u8)(signed char)q;
    frag[8 + half * 4 + byte] = (u8)(signed char)q2;
    if (v == 0) {
        float* s = xd + ((u64)kb * mt * 4 + row / 2) * 4 + (row & 1) * 2;
        s[0] = d;
        s[1] = d2;
    }
}

// This lane's A fragment words of weight rows `row` and `row + 8`, block kb (zeros past n), and their d.
struct MmqA {
    u32 a[4];
    float d[2];
};
__device__ __forceinline__ MmqA mmq_load(const u8* __restrict__ qs, const u8* __restrict__ dm, u32 n, u32 nb,
                                         u32 row, u32 kb, u32 t) {
    MmqA r;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const bool ok = row + 8 * h < n;
        const u64 blk = ok ? (u64)(row + 8 * h) * nb + kb : 0;
        u32 lo, hi;
        mma_b(qs + blk * QS_BYTES, nullptr, t, lo, hi);
        const u32 sc = *(const u32*)(dm + sc_offset(blk));
        r.a[h] = ok ? lo : 0u;      // a0: row g, values 4t..; a1: row g + 8
        r.a[2 + h] = ok ? hi : 0u;  // a2: row g, values 16 + 4t..; a3: row g + 8
        r.d[h] = ok ? mma_scale(&sc, blk).x : 0.0f;
    }
    return r;
}

// acc[i][j] += one block: the warp's two m16 tiles (w) × x's MT tiles of one block (xs, ss in shared memory).
template <int MT>
__device__ __forceinline__ void mmq_block(float acc[2][MT][4], const MmqA w[2], const uint4 xs[MT][32],
                                          const float4 ss[MT * 4], u32 lane, u32 t) {
#pragma unroll
    for (int j = 0; j < MT; j++) {
        const uint4 xv = xs[j][lane];
        const float4 s = ss[4 * j + t];  // rows 8j + 2t, 8j + 2t + 1
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
            mma_s8(c0, w[i].a[0], w[i].a[1], w[i].a[2], w[i].a[3], xv.x, xv.y);
            mma_s8(c1, w[i].a[0], w[i].a[1], w[i].a[2], w[i].a[3], xv.z, xv.w);
            // c[e]: weight row g + 8 (e >> 1), x row 8j + 2t + (e & 1).
            acc[i][j][0] += w[i].d[0] * (s.x * (float)c0[0] + s.y * (float)c1[0]);
            acc[i][j][1] += w[i].d[0] * (s.z * (float)c0[1] + s.w * (float)c1[1]);
            acc[i][j][2] += w[i].d[1] * (s.x * (float)c0[2] + s.y * (float)c1[2]);
            acc[i][j][3] += w[i].d[1] * (s.z * (float)c0[3] + s.w * (float)c1[3]);
        }
    }
}

// Element e of tile (i, j) of this lane: (x row, weight row).
__device__ __forceinline__ uint2 mmq_at(int i, int j, int e, u32 n0w, u32 g, u32 t) {
    return make_uint2(8 * j + 2 * t + (e & 1), n0w + 16 * i + g + 8 * (e >> 1));
}

template <int MT>
__device__ __forceinline__ void mmq_store(float acc[2][MT][4], float* dst, float* partial, u32* done, u32 m, u32 n,
                                          u32 n0w, u32 g, u32 t) {
    const u32 z = blockIdx.y, splits = gridDim.y;
    float* out = splits == 1 ? dst : partial + (u64)z * m * n;
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint2 at = mmq_at(i, j, e, n0w, g, t);
                if (at.x < m && at.y < n) out[(u64)at.x * n + at.y] = acc[i][j][e];
            }
    if (splits == 1) return;
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&done[blockIdx.x], 1u) == splits - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (threadIdx.x == 0) done[blockIdx.x] = 0;  // zero again for the next launch (or graph replay)
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint2 at = mmq_at(i, j, e, n0w, g, t);
                if (at.x >= m || at.y >= n) continue;
                float sum = 0.0f;
                for (u32 s = 0; s < splits; s++)
                    sum += s == z ? acc[i][j][e] : __ldcg(&partial[((u64)s * m + at.x) * n + at.y]);
                dst[(u64)at.x * n + at.y] = sum;
            }
}

// x's fragments of MMQ_CHUNK k-blocks, shared by the block's warps (one barrier per chunk, not per block).
template <int MT>
struct __align__(16) MmqChunk {
    uint4 x[MMQ_CHUNK][MT][32];
    float4 s[MMQ_CHUNK][MT * 4];
};

// Queues the copies of chunk kb.. (k-blocks past nb_all: zeros) into c; 128 threads.
template <int MT>
__device__ __forceinline__ void mmq_chunk_load(MmqChunk<MT>& c, const uint4* xf, const float4* xd, u32 kb,
                                               u32 nb_all) {
    constexpr u32 xs = MMQ_CHUNK * MT * 32, ss = MMQ_CHUNK * MT * 4;
    for (u32 i = threadIdx.x; i < xs + ss; i += MMQ_BN) {
        if (i < xs) {
            const u32 b = i / (MT * 32);
            const bool ok = kb + b < nb_all;
            cp_async<16>(&c.x[0][0][0] + i, xf + (ok ? (u64)kb * MT * 32 + i : 0), ok);
        } else {
            const u32 e = i - xs, b = e / (MT * 4);
            const bool ok = kb + b < nb_all;
            cp_async<16>(&c.s[0][0] + e, xd + (ok ? (u64)kb * MT * 4 + e : 0), ok);
        }
    }
}

template <int MT>
__device__ __forceinline__ void mmq_tile(const u8* __restrict__ qs, const u8* __restrict__ dm,
                                         const uint4* __restrict__ xf, const float4* __restrict__ xd, float* dst,
                                         float* partial, u32* done, u32 m, u32 n, u32 k) {
    __shared__ MmqChunk<MT> chunks[2];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const u32 n0w = blockIdx.x * MMQ_BN + warp * 32;
    const u32 nb_all = k / 32, per = (nb_all + gridDim.y - 1) / gridDim.y;
    const u32 kb0 = min(nb_all, blockIdx.y * per), kb1 = min(nb_all, kb0 + per);
    float acc[2][MT][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    // Weight fragments of the chunk's MMQ_CHUNK k-blocks in registers: slot kk holds block kb0 + kk (+ the
    // chunks done), reloaded with the next chunk's block once used.
    MmqA w[MMQ_CHUNK][2];
#pragma unroll
    for (int kk = 0; kk < MMQ_CHUNK; kk++)
#pragma unroll
        for (int i = 0; i < 2; i++) w[kk][i] = mmq_load(qs, dm, n, nb_all, n0w + 16 * i + g, min(kb0 + kk, nb_all - 1), t);
    mmq_chunk_load<MT>(chunks[0], xf, xd, kb0, nb_all);
    cp_async_commit();
    for (u32 c = 0, kb = kb0; kb < kb1; c++, kb += MMQ_CHUNK) {
        cp_async_wait<0>();  // this chunk's x has landed (this thread's copies) ...
        __syncthreads();     // ... everyone's, and the other buffer's last reader is done
        if (kb + MMQ_CHUNK < kb1) mmq_chunk_load<MT>(chunks[(c + 1) & 1], xf, xd, kb + MMQ_CHUNK, nb_all);
        cp_async_commit();
        const MmqChunk<MT>& x = chunks[c & 1];
#pragma unroll
        for (int kk = 0; kk < MMQ_CHUNK; kk++) {
            if (kb + kk >= kb1) break;
            MmqA next[2];
            const u32 ahead = min(kb + kk + MMQ_CHUNK, nb_all - 1);
#pragma unroll
            for (int i = 0; i < 2; i++) next[i] = mmq_load(qs, dm, n, nb_all, n0w + 16 * i + g, ahead, t);
            mmq_block<MT>(acc, w[kk], x.x[kk], x.s[kk], lane, t);
#pragma unroll
            for (int i = 0; i < 2; i++) w[kk][i] = next[i];
        }
    }
    cp_async_wait<0>();
    mmq_store<MT>(acc, dst, partial, done, m, n, n0w, g, t);
}

#define MATMUL_MMQ(MT)                                                                                            \
    extern "C" __global__ void __launch_bounds__(128)                                                              \
        matmul_mmq_t##MT(const u8* __restrict__ qs, const u8* __restrict__ dm, const uint4* __restrict__ xf,       \
                         const float4* __restrict__ xd, float* dst, float* partial, u32* done, u32 m, u32 n, u32 k) { \
        mmq_tile<MT>(qs, dm, xf, xd, dst, partial, done, m, n, k);                                                 \
    }
MATMUL_MMQ(2)
MATMUL_MMQ(4)
MATMUL_MMQ(6)
MATMUL_MMQ(8)

#endif
