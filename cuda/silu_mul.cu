// silu_mul  dst[i] = gate[i] / (1 + exp(-gate[i])) · up[i]      (SwiGLU)
// Layout    gate, up, dst: n contiguous f32
// Launch    one thread per element, 256-thread blocks
// Numerics  f32, expf at full precision

extern "C" __global__ void silu_mul(const float* gate, const float* up, float* dst, u64 n) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        dst[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
