// silu_mul  dst[i] = gate[i] / (1 + exp(-gate[i])) · up[i]      (SwiGLU)
// Layout    gate, up, dst: n contiguous f32
// Launch    one thread per element, 256-thread blocks
// Numerics  f32, expf at full precision
// silu_mul_q8  the same values, and also their two int8 planes for the decode GEMV that reads dst next
//              (quantize_q8_1.cu, joined before this file), saving that GEMV's quantize launch; n % 32 == 0

extern "C" __global__ void silu_mul(const float* gate, const float* up, float* dst, u64 n) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        dst[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

extern "C" __global__ void silu_mul_q8(const float* gate, const float* up, float* dst, u64 n, signed char* xq,
                                       float2* xds) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if ((i & ~31ull) >= n) return;  // whole warps leave together
    float v = 0.0f;
    if (i < n) {
        const float g = gate[i];
        v = g / (1.0f + expf(-g)) * up[i];
        dst[i] = v;
    }
    quantize_q8_1_lane(v, i, n, xq, xds);
}
