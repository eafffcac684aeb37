// gather_rows  dst[i, :] = x[rows[i], :]
// Layout       x: [n_x, cols] f32; rows: u32 [n]; dst: [n, cols]
// Launch       one thread per element of dst, 256-thread blocks
// Numerics     a copy; an out-of-range row gives zeros

extern "C" __global__ void gather_rows(const float* x, const u32* rows, float* dst, u64 n, u32 cols, u32 n_x) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const u32 r = rows[i / cols];
        dst[i] = r < n_x ? x[(u64)r * cols + i % cols] : 0.0f;
    }
}
