// matmul      dst[m, n] = Σ_k x[m, k] · w[n, k]; body joined after one format decoder (matmul_<format>.cu)
// Layout      x: f32 [m][k] (float weights) or int8 xq [2][m][k] + float2 xds [2][m][k/32] (quantized: two
//             planes, x ≈ d · xq + d2 · xq2, quantize_q8_1.cu)
// Launch      matmul_vec_mM: 32/group rows per warp, group lanes per row, grid.y = ceil(m / M), grid.x
//             the blocks of up to three weights sharing x;
//             matmul_tile: 64×64 output tile per 256-thread block, K steps of 32 through shared memory
// Numerics    vec: exact int32 block sums (dp4a) for each plane of x, scaled in f32 and added, lane-strided
//             then xor-shuffle reduced;
//             tile: f32 FMAs in k order per thread

// M rows of x against R consecutive weight rows per lane group: each x block a lane loads serves R
// weight rows, so x's bytes through L1 (two int8 planes and their scales, ~4.4× the weight bytes of a
// Q4_0 block) are paid once per R rows. Each row's sums keep their order, so R does not change bits.
template <int M, int R>
__device__ __forceinline__ void matmul_vec_body(const u8* qs, const u8* qh, const u8* dm, const void* x,
                                                const float2* xds, float* dst, u32 m, u32 n, u32 k, u32 group,
                                                u32 block) {
    const u32 lane = threadIdx.x & 31;
    const u64 warp = ((u64)block * blockDim.x + threadIdx.x) >> 5;
    const u64 row0 = (warp * (32 / group) + lane / group) * R;
    const u32 sub = lane & (group - 1);
    const u32 m0 = blockIdx.y * M;
    float acc[M][R];
#pragma unroll
    for (int r = 0; r < M; r++)
#pragma unroll
        for (int i = 0; i < R; i++) acc[r][i] = 0.0f;
    if (row0 < n) {
#if FORMAT_QUANTIZED
        const u32 nb = k / 32;
        const int4* xq = (const int4*)x;
        const u64 plane = (u64)m * nb;  // blocks per plane of x (quantize_q8_1.cu)
        // Four weight blocks in flight per lane for one or two rows of x (R rows × the unroll): a
        // 4096-wide row is then one round trip to memory per lane instead of two.
#pragma unroll((M <= 2 ? 4 : 2) / R > 0 ? (M <= 2 ? 4 : 2) / R : 1)
        for (u32 b = sub; b < nb; b += group) {
#pragma unroll
            for (int r = 0; r < M; r++) {
                if (m0 + r < m) {
                    const u64 xb = (u64)(m0 + r) * nb + b, xb2 = plane + xb;
                    const int4 x0 = xq[2 * xb], x1 = xq[2 * xb + 1], y0 = xq[2 * xb2], y1 = xq[2 * xb2 + 1];
                    const float2 xd = xds[xb], yd = xds[xb2];
#pragma unroll
                    for (int i = 0; i < R; i++) {
                        if (row0 + i < n) {
                            const u64 blk = (row0 + i) * nb + b;
                            acc[r][i] += block_dot(qs, qh, dm, blk, x0, x1, xd) + block_dot(qs, qh, dm, blk, y0, y1, yd);
                        }
                    }
                }
            }
        }
#else
        const float* xf = (const float*)x;
        for (u32 c = sub; c < k; c += group) {
            float w[R];
#pragma unroll
            for (int i = 0; i < R; i++) w[i] = row0 + i < n ? w_get(qs, qh, dm, row0 + i, c, k) : 0.0f;
#pragma unroll
            for (int r = 0; r < M; r++) {
                if (m0 + r < m) {
                    const float xv = xf[(u64)(m0 + r) * k + c];
#pragma unroll
                    for (int i = 0; i < R; i++) acc[r][i] += w[i] * xv;
                }
            }
        }
#endif
    }
#pragma unroll
    for (int r = 0; r < M; r++) {
#pragma unroll
        for (int i = 0; i < R; i++) {
            for (u32 o = group >> 1; o > 0; o >>= 1) acc[r][i] += __shfl_xor_sync(FULL_MASK, acc[r][i], o);
        }
    }
    if (sub == 0) {
#pragma unroll
        for (int r = 0; r < M; r++) {
#pragma unroll
            for (int i = 0; i < R; i++) {
                if (m0 + r < m && row0 + i < n) dst[(u64)(m0 + r) * n + row0 + i] = acc[r][i];
            }
        }
    }
}

// Up to three matmuls of one x in one launch (q, k, v; gate, up): blocks [0, b0) compute part 0,
// the next b1 part 1, the rest part 2; unused parts have n = 0 and get no blocks.
#define MATMUL_VEC(M, R)                                                                                        \
    extern "C" __global__ void matmul_vec_m##M##_r##R(                                                        \
        const u8* qs0, const u8* qh0, const u8* dm0, float* dst0, u32 n0, const u8* qs1, const u8* qh1,       \
        const u8* dm1, float* dst1, u32 n1, const u8* qs2, const u8* qh2, const u8* dm2, float* dst2, u32 n2, \
        const void* x, const float2* xds, u32 m, u32 k, u32 group) {                                          \
        GRID_DEPENDENCY_WAIT();                                                                               \
        const u32 rows = (blockDim.x / 32) * (32 / group) * R, b0 = (n0 + rows - 1) / rows;                   \
        const u32 b1 = (n1 + rows - 1) / rows, b = blockIdx.x;                                                \
        if (b < b0) matmul_vec_body<M, R>(qs0, qh0, dm0, x, xds, dst0, m, n0, k, group, b);                   \
        else if (b - b0 < b1) matmul_vec_body<M, R>(qs1, qh1, dm1, x, xds, dst1, m, n1, k, group, b - b0);    \
        else matmul_vec_body<M, R>(qs2, qh2, dm2, x, xds, dst2, m, n2, k, group, b - b0 - b1);                \
    }
MATMUL_VEC(1, 1)
MATMUL_VEC(1, 2)
MATMUL_VEC(2, 1)
MATMUL_VEC(2, 2)
MATMUL_VEC(4, 1)
MATMUL_VEC(4, 2)
MATMUL_VEC(8, 1)
MATMUL_VEC(8, 2)

#define TILE 64
#define TILE_K 32

extern "C" __global__ void __launch_bounds__(256) matmul_tile(const u8* qs, const u8* qh, const u8* dm,
                                                              const float* x, float* dst, u32 m, u32 n, u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ float xs[TILE_K][TILE + 4];
    __shared__ float ws[TILE_K][TILE + 4];
    const u32 tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const u32 m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    float acc[4][4] = {};
    for (u32 k0 = 0; k0 < k; k0 += TILE_K) {
#pragma unroll
        for (int i = 0; i < TILE * TILE_K / 256; i++) {
            const u32 idx = tid + 256 * i, r = idx / TILE_K, c = idx % TILE_K;
            const bool in_k = k0 + c < k;
            xs[c][r] = (m0 + r < m && in_k) ? x[(u64)(m0 + r) * k + k0 + c] : 0.0f;
            ws[c][r] = (n0 + r < n && in_k) ? w_get(qs, qh, dm, n0 + r, k0 + c, k) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE_K; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = xs[kk][ty * 4 + i];
                b[i] = ws[kk][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const u32 r = m0 + ty * 4 + i;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 c = n0 + tx * 4 + j;
            if (r < m && c < n) dst[(u64)r * n + c] = acc[i][j];
        }
    }
}
