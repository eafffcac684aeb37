// gelu_mul  dst[i] = gelu(gate[i]) · up[i], gelu(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³)))   (GeGLU, Gemma)
// Layout    gate, up, dst: n contiguous f32
// Launch    one thread per element, 256-thread blocks
// Numerics  f32, tanhf at full precision on the argument clamped to ±10 (as the CPU and WGSL do)

extern "C" __global__ void gelu_mul(const float* gate, const float* up, float* dst, u64 n) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        const float u = 0.7978846f * (g + 0.044715f * g * g * g);
        dst[i] = 0.5f * g * (1.0f + tanhf(fminf(fmaxf(u, -10.0f), 10.0f))) * up[i];
    }
}
