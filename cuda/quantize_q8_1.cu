// quantize_q8_1  xq[i] = round(x[i] / d_b), d_b = max|x| over the 32-value block b / 127; xds[b] = (d_b, d_b · Σ xq)
// Layout         x: f32 [m][k], k a multiple of 32; xq: int8 [m][k]; xds: float2 [m][k / 32]
// Launch         one thread per value, one warp per block (blockDim a multiple of 32)
// Numerics       max and sum by xor shuffles; round half to even (rintf); all-zero blocks give d = 0

extern "C" __global__ void quantize_q8_1(const float* x, signed char* xq, float2* xds, u64 total) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= total) return;  // whole warps leave together
    const float v = i < total ? x[i] : 0.0f;
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float q = amax == 0.0f ? 0.0f : rintf(v / d);
    const float s = warp_sum(q);
    if (i < total) xq[i] = (signed char)q;
    if ((i & 31) == 0) xds[i / 32] = make_float2(d, d * s);
}
