// rms_norm  dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout    x, dst: [n_rows, d] row-major f32; gain: [d]
// Launch    one block per row; blockDim.x threads stride along the row
// Numerics  f32 partial sums, reduced by block_sum (warp shuffles, then shared memory)

extern "C" __global__ void rms_norm(const float* x, const float* gain, float* dst, u32 d, float eps) {
    const u64 row_start = (u64)blockIdx.x * d;
    float sum_sq = 0.0f;
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = x[row_start + i];
        sum_sq += v * v;
    }
    sum_sq = block_sum(sum_sq);
    const float scale = rsqrtf(sum_sq / (float)d + eps);
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) dst[row_start + i] = x[row_start + i] * scale * gain[i];
}
