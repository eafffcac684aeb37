// quantize_q8_1  x ≈ d_b · xq + d2_b · xq2 per 32-value block b, two int8 planes: xq = round(x / d_b),
//                d_b = max|x| / 127; xq2 = round(r / d2_b) of the residual r = x - d_b · xq, d2_b = max|r| / 127
// Layout         x: f32 [m][k], k a multiple of 32; xq: int8 [2][m][k] (plane 0 = xq, plane 1 = xq2);
//                xds: float2 [2][m][k / 32] = (d, d · Σ q) of each plane's block
// Launch         one thread per value, one warp per block (blockDim a multiple of 32)
// Numerics       max and sum by xor shuffles; round half to even (rintf); all-zero blocks give d = 0.
//                One plane alone is off by up to d_b / 2 per value (~0.4% of the block's max), enough
//                to move the reference model's greedy text away from the CPU's; the second plane leaves
//                at most d_b / 508 (~1.5e-5 of the max), closer to f32 than f16 is, for two dp4a per
//                four values instead of one.

// Value i of x (one lane of the warp that holds its 32-value block; every lane of the warp calls).
__device__ __forceinline__ void quantize_q8_1_lane(float v, u64 i, u64 total, signed char* xq, float2* xds) {
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float q = amax == 0.0f ? 0.0f : rintf(v / d);
    const float r = v - d * q;
    const float rmax = warp_max(fabsf(r));
    const float d2 = rmax / 127.0f;
    const float q2 = rmax == 0.0f ? 0.0f : rintf(r / d2);
    const float s = warp_sum(q), s2 = warp_sum(q2);
    if (i < total) {
        xq[i] = (signed char)q;
        xq[total + i] = (signed char)q2;
    }
    if ((i & 31) == 0) {
        xds[i / 32] = make_float2(d, d * s);
        xds[total / 32 + i / 32] = make_float2(d2, d2 * s2);
    }
}

// Where a kernel that makes x also writes x's planes (the norm, attention's merge; total = x's values),
// for the decode GEMV that reads x next; xq null: no planes.
struct Q8Out {
    signed char* xq;
    float2* xds;
    u64 total;
};

extern "C" __global__ void quantize_q8_1(const float* x, signed char* xq, float2* xds, u64 total) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= total) return;  // whole warps leave together
    quantize_q8_1_lane(i < total ? x[i] : 0.0f, i, total, xq, xds);
}
