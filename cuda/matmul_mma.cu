// matmul_mma  dst[m, n] = Σ_blocks b (d_w · d_x · Σ_{j∈b} q_w q_x + m_w · s_x)    (m > 8, quantized weights)
//             body joined after one quantized format decoder (matmul_<format>.cu: mma_b, DM_PAIRED, HAS_QH, HAS_M)
// Layout      xq int8 [m][k] + xds float2 (d_x, s_x) [m][k/32] from quantize_q8_1.cu; weights as repacked
//             (qs 16/32 bytes per block, qh u32 per block, dm f16 d per block or u32 (d, m) per block)
// Launch      grid (ceil(n / 128), ceil(m / 64)), 256 threads = 8 warps, each 32 rows × 32 columns of the
//             64 × 128 output tile (2 warps along m × 4 along n); k in steps of one 32-value block, raw blocks
//             copied into shared memory by cp.async MMA_STAGES deep; weights decoded to int8 per fragment
// Numerics    exact int32 block sums (mma.sync m16n8k32 s8·s8 → s32), scaled in f32 once per block and
//             summed in k order: the GEMV's block_dot terms, with the zero offset folded into the weights

#if FORMAT_QUANTIZED

#define MMA_BM 64
#define MMA_BN 128
#define MMA_STAGES 4
#define X_STRIDE 48                                // bytes per x row in shared memory: 32 + 16 padding
#define W_STRIDE (QS_BYTES == 32 ? 48 : QS_BYTES)  // 12 or 4 words: a warp's fragment loads hit 32 banks

struct __align__(16) MmaStage {
    u8 x[MMA_BM * X_STRIDE];   // int8 activations, one block per row
    u8 w[MMA_BN * W_STRIDE];   // raw quant bytes, one block per weight row
    float2 xds[MMA_BM];        // (d_x, s_x) per row
    u32 wdm[MMA_BN];           // the dm word holding the block's scale(s)
    u32 wqh[MMA_BN];           // fifth bits (Q5 formats)
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

// d[0..4] += A (16×32 int8, row-major fragment a) · B (32×8 int8, column fragment b0, b1), exact int32.
__device__ __forceinline__ void mma_s8(int d[4], const u32 a[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (d, m) of block `blk` from its dm word: paired formats store two f16 d per word (blocks 2i, 2i+1).
__device__ __forceinline__ float2 mma_dm(u32 word, u64 blk) {
#if DM_PAIRED
    return make_float2(f16_to_f32((blk & 1) ? (word >> 16) : (word & 0xffff)), 0.0f);
#else
    return make_float2(f16_to_f32(word & 0xffff), f16_to_f32(word >> 16));
#endif
}

// Queues the copies of k-block kb of the tile (rows m0.., weight rows n0..) into stage s.
__device__ __forceinline__ void mma_load(MmaStage& s, const u8* qs, const u8* qh, const u8* dm, const u8* xq,
                                         const float2* xds, u32 m, u32 n, u32 k, u32 m0, u32 n0, u32 kb) {
    const u32 tid = threadIdx.x, nb = k / 32;
    if (tid < 2 * MMA_BM) {
        const u32 r = tid >> 1, h = tid & 1;
        const bool ok = m0 + r < m;
        cp_async<16>(s.x + r * X_STRIDE + 16 * h, xq + (ok ? (u64)(m0 + r) * k + kb * 32 + 16 * h : 0), ok);
    } else if (tid < 3 * MMA_BM) {
        const u32 r = tid - 2 * MMA_BM;
        const bool ok = m0 + r < m;
        cp_async<8>(&s.xds[r], xds + (ok ? (u64)(m0 + r) * nb + kb : 0), ok);
    }
#pragma unroll
    for (u32 i = tid; i < MMA_BN * (QS_BYTES / 16); i += 256) {
        const u32 r = i / (QS_BYTES / 16), h = i % (QS_BYTES / 16);
        const bool ok = n0 + r < n;
        const u64 blk = (u64)(n0 + r) * nb + kb;
        cp_async<16>(s.w + r * W_STRIDE + 16 * h, qs + (ok ? blk * QS_BYTES + 16 * h : 0), ok);
    }
    if (tid < MMA_BN) {
        const bool ok = n0 + tid < n;
        const u64 blk = (u64)(n0 + tid) * nb + kb;
        // Paired formats: the aligned word holding blocks (blk & ~1, blk | 1); dm is padded on upload.
        cp_async<4>(&s.wdm[tid], dm + (ok ? (DM_PAIRED ? (blk & ~1ull) * 2 : blk * 4) : 0), ok);
    }
#if HAS_QH
    else if (tid < 2 * MMA_BN) {
        const u32 r = tid - MMA_BN;
        const bool ok = n0 + r < n;
        cp_async<4>(&s.wqh[r], qh + (ok ? ((u64)(n0 + r) * nb + kb) * 4 : 0), ok);
    }
#endif
}

extern "C" __global__ void __launch_bounds__(256)
    matmul_mma(const u8* qs, const u8* qh, const u8* dm, const u8* xq, const float2* xds, float* dst, u32 m, u32 n,
               u32 k) {
    __shared__ MmaStage stages[MMA_STAGES];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const u32 m0 = blockIdx.y * MMA_BM, n0 = blockIdx.x * MMA_BN;
    const u32 wm = (warp >> 2) * 32, wn = (warp & 3) * 32;
    const u32 nb = k / 32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
    for (u32 s = 0; s < MMA_STAGES - 1; s++) {
        if (s < nb) mma_load(stages[s], qs, qh, dm, xq, xds, m, n, k, m0, n0, s);
        cp_async_commit();
    }
    for (u32 kb = 0; kb < nb; kb++) {
        cp_async_wait<MMA_STAGES - 2>();  // block kb has landed (this thread's copies) ...
        __syncthreads();                  // ... everyone's, and stage (kb - 1) % STAGES is free again
        const u32 next = kb + MMA_STAGES - 1;
        if (next < nb) mma_load(stages[next % MMA_STAGES], qs, qh, dm, xq, xds, m, n, k, m0, n0, next);
        cp_async_commit();

        const MmaStage& s = stages[kb % MMA_STAGES];
        u32 a[2][4];
        float2 xs[2][2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u32 r = wm + 16 * i + g;
            const u8* xr = s.x + r * X_STRIDE + 4 * t;
            a[i][0] = *(const u32*)xr;
            a[i][1] = *(const u32*)(xr + 8 * X_STRIDE);
            a[i][2] = *(const u32*)(xr + 16);
            a[i][3] = *(const u32*)(xr + 8 * X_STRIDE + 16);
            xs[i][0] = s.xds[r];
            xs[i][1] = s.xds[r + 8];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 c = wn + 8 * j;
            u32 b0, b1;
            mma_b(s.w + (c + g) * W_STRIDE, s.wqh[c + g], t, b0, b1);
            // This lane's two output columns c + 2t, c + 2t + 1.
            const float2 w0 = mma_dm(s.wdm[c + 2 * t], (u64)(n0 + c + 2 * t) * nb + kb);
            const float2 w1 = mma_dm(s.wdm[c + 2 * t + 1], (u64)(n0 + c + 2 * t + 1) * nb + kb);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int d[4] = {0, 0, 0, 0};
                mma_s8(d, a[i], b0, b1);
                acc[i][j][0] += w0.x * xs[i][0].x * (float)d[0];
                acc[i][j][1] += w1.x * xs[i][0].x * (float)d[1];
                acc[i][j][2] += w0.x * xs[i][1].x * (float)d[2];
                acc[i][j][3] += w1.x * xs[i][1].x * (float)d[3];
#if HAS_M
                acc[i][j][0] += w0.y * xs[i][0].y;
                acc[i][j][1] += w1.y * xs[i][0].y;
                acc[i][j][2] += w0.y * xs[i][1].y;
                acc[i][j][3] += w1.y * xs[i][1].y;
#endif
            }
        }
    }
    cp_async_wait<0>();

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

#endif
