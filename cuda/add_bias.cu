// add_bias  x[r, c] += bias[c]
// Layout    x: [rows, cols] f32; bias: [cols]
// Launch    one thread per element of x, 256-thread blocks
// Numerics  one f32 add

extern "C" __global__ void add_bias(float* x, const float* bias, u64 n, u32 cols) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += bias[i % cols];
}
