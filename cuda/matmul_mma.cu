// matmul_mma  dst[m, n] = Σ_blocks b (d_w · Σ_{j∈b} q_w x_j + m_w · Σ_{j∈b} x_j)    (m > 8, quantized weights)
//             body joined after one quantized format decoder (matmul_<format>.cu: mma_b, DM_PAIRED, HAS_QH, HAS_M)
// Layout      xh f16 [m][k] + xsum f32 [m][k/32] from matmul_mma_prep; weights as repacked (qs 16/32 bytes
//             per block, qh u32 per block, dm f16 d per block or u32 (d, m) per block)
// Launch      matmul_mma_prep: one thread per value, one warp per block. matmul_mma: grid (ceil(n / 128),
//             ceil(m / 64)), 256 threads = 8 warps, each 32 rows × 32 columns of the 64 × 128 output tile
//             (2 warps along m × 4 along n); k in steps of one 32-value block, raw blocks copied into shared
//             memory by cp.async MMA_STAGES deep; weight quants decoded per fragment to exact f16 integers
// Numerics    x rounded once to f16 (the only rounding before f32); q_w exact in f16; each block's
//             Σ q_w x_j by two mma.sync m16n8k16 (f16 in, f32 accumulate), scaled by d_w in f32 and summed
//             in k order. (Within a block, k is permuted identically for A and B: values 4t..4t+3 of the
//             int8 pack feed fragment positions 2t, 2t+1, 2t+8, 2t+9.)

#if FORMAT_QUANTIZED

#define MMA_BM 64
#define MMA_BN 128
#define MMA_STAGES (QS_BYTES == 32 ? 3 : 4)       // 3 × 12.5 KB or 4 × 8.4 KB of static shared memory
#define X_STRIDE 80                                // bytes per x row in shared memory: 32 halves + 16 padding
#define W_STRIDE (QS_BYTES == 32 ? 48 : QS_BYTES)  // 12 or 4 words: a warp's fragment loads hit 32 banks

struct __align__(16) MmaStage {
    u8 x[MMA_BM * X_STRIDE];   // f16 activations, one block per row
    u8 w[MMA_BN * W_STRIDE];   // raw quant bytes, one block per weight row
    float xsum[MMA_BM];        // Σ x over the block, per row (HAS_M formats)
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

// xh = f16(x), xsum[b] = Σ x over block b (32 values).    x: f32 [total], total a multiple of 32
extern "C" __global__ void matmul_mma_prep(const float* x, u16* xh, float* xsum, u64 total) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= total) return;  // whole warps leave together
    const float v = i < total ? x[i] : 0.0f;
    const float s = warp_sum(v);
    if (i < total) xh[i] = f32_to_f16(v);
    if ((i & 31) == 0) xsum[i / 32] = s;
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
__device__ __forceinline__ void mma_load(MmaStage& s, const u8* qs, const u8* qh, const u8* dm, const u8* xh,
                                         const float* xsum, u32 m, u32 n, u32 k, u32 m0, u32 n0, u32 kb) {
    const u32 tid = threadIdx.x, nb = k / 32;
    {
        const u32 r = tid >> 2, h = tid & 3;  // 64 rows × 4 pieces of 16 bytes
        const bool ok = m0 + r < m;
        cp_async<16>(s.x + r * X_STRIDE + 16 * h, xh + (ok ? ((u64)(m0 + r) * k + kb * 32) * 2 + 16 * h : 0), ok);
    }
#if HAS_M
    if (tid < MMA_BM) {
        const bool ok = m0 + tid < m;
        cp_async<4>(&s.xsum[tid], xsum + (ok ? (u64)(m0 + tid) * nb + kb : 0), ok);
    }
#endif
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
    matmul_mma(const u8* qs, const u8* qh, const u8* dm, const u8* xh, const float* xsum, float* dst, u32 m, u32 n,
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
        if (s < nb) mma_load(stages[s], qs, qh, dm, xh, xsum, m, n, k, m0, n0, s);
        cp_async_commit();
    }
    for (u32 kb = 0; kb < nb; kb++) {
        cp_async_wait<MMA_STAGES - 2>();  // block kb has landed (this thread's copies) ...
        __syncthreads();                  // ... everyone's, and stage (kb - 1) % STAGES is free again
        const u32 next = kb + MMA_STAGES - 1;
        if (next < nb) mma_load(stages[next % MMA_STAGES], qs, qh, dm, xh, xsum, m, n, k, m0, n0, next);
        cp_async_commit();

        const MmaStage& s = stages[kb % MMA_STAGES];
        // A fragments of both k16 halves of the block: row r, values 4t..4t+3 (step 0) and 16+4t.. (step 1).
        uint2 a[2][2][2];  // [m tile][step][row g, row g + 8]
#if HAS_M
        float xs[2][2];
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
            xs[i][0] = s.xsum[r];
            xs[i][1] = s.xsum[r + 8];
#endif
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 c = wn + 8 * j;
            u32 p0, p1, b[2][2];
            mma_b(s.w + (c + g) * W_STRIDE, s.wqh[c + g], t, p0, p1);
            i8x4_to_f16(p0, b[0][0], b[0][1]);
            i8x4_to_f16(p1, b[1][0], b[1][1]);
            // This lane's two output columns c + 2t, c + 2t + 1.
            const float2 w0 = mma_dm(s.wdm[c + 2 * t], (u64)(n0 + c + 2 * t) * nb + kb);
            const float2 w1 = mma_dm(s.wdm[c + 2 * t + 1], (u64)(n0 + c + 2 * t + 1) * nb + kb);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int st = 0; st < 2; st++) {
                    const uint2 lo = a[i][st][0], hi = a[i][st][1];
                    mma_f16(d, lo.x, hi.x, lo.y, hi.y, b[st][0], b[st][1]);
                }
                acc[i][j][0] += w0.x * d[0];
                acc[i][j][1] += w1.x * d[1];
                acc[i][j][2] += w0.x * d[2];
                acc[i][j][3] += w1.x * d[3];
#if HAS_M
                acc[i][j][0] += w0.y * xs[i][0];
                acc[i][j][1] += w1.y * xs[i][0];
                acc[i][j][2] += w0.y * xs[i][1];
                acc[i][j][3] += w1.y * xs[i][1];
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
