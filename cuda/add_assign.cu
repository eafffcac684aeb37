// add_assign  x[i] += y[i]      (residual)
// Layout      x, y: n contiguous f32
// Launch      one thread per element, 256-thread blocks
// Numerics    one f32 add

extern "C" __global__ void add_assign(float* x, const float* y, u64 n) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}
