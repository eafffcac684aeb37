// argmax    dst[r] = argmax_j x[r, j], lowest index on ties (NaN never wins)
// Layout    x: [rows, vocab] f32; dst: u32 [rows]
// Launch    one block of 1024 threads per row; one pass, threads stride the row, then shuffle + shared reduction
// Numerics  exact comparisons; (value, index) pairs reduced with "greater, or equal and lower index"

__device__ __forceinline__ void better(float& v, u32& i, float v2, u32 i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

extern "C" __global__ void argmax(const float* x, u32* dst, u32 vocab) {
    GRID_DEPENDENCY_WAIT();
    __shared__ float sv[32];
    __shared__ u32 si[32];
    const float* row = x + (u64)blockIdx.x * vocab;
    float v = -INFINITY;
    u32 idx = 0xffffffffu;
    for (u32 j = threadIdx.x; j < vocab; j += blockDim.x) better(v, idx, row[j], j);
    for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(FULL_MASK, v, o), __shfl_xor_sync(FULL_MASK, idx, o));
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        const u32 n_warps = blockDim.x >> 5;
        v = lane < n_warps ? sv[lane] : -INFINITY;
        idx = lane < n_warps ? si[lane] : 0xffffffffu;
        for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(FULL_MASK, v, o), __shfl_xor_sync(FULL_MASK, idx, o));
        if (lane == 0) dst[blockIdx.x] = idx == 0xffffffffu ? 0 : idx;
    }
}
