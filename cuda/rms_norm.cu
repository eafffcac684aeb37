// rms_norm  dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout    x, dst: [n_rows, d] row-major f32; gain: [d]
// Launch    one block per row; blockDim.x threads stride along the row
// Numerics  f32 partial sums, reduced by block_sum (warp shuffles, then shared memory)
// add_rms_norm  x[r, :] += y[r, :], then rms_norm of the sum into dst: the same adds and the same sums
//               in the same order as add_assign then rms_norm, so the same bits, one launch fewer

// One row per block: x (+= y when ADD), then dst = x · gain / rms(x). Each thread rereads only
// the x values it wrote itself.
template <bool ADD>
__device__ __forceinline__ void norm_row(float* x, const float* y, const float* gain, float* dst, u32 d, float eps) {
    const u64 row_start = (u64)blockIdx.x * d;
    float sum_sq = 0.0f;
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
        float v = x[row_start + i];
        if (ADD) {
            v += y[row_start + i];
            x[row_start + i] = v;
        }
        sum_sq += v * v;
    }
    sum_sq = block_sum(sum_sq);
    const float scale = rsqrtf(sum_sq / (float)d + eps);
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) dst[row_start + i] = x[row_start + i] * scale * gain[i];
}

extern "C" __global__ void rms_norm(const float* x, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<false>((float*)x, nullptr, gain, dst, d, eps);  // ADD = false: x is only read
}

extern "C" __global__ void add_rms_norm(float* x, const float* y, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<true>(x, y, gain, dst, d, eps);
}
