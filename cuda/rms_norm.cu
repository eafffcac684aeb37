// rms_norm  dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout    x, dst: [n_rows, d] row-major f32; gain: [d]
// Launch    one block per row; thread t holds values t + j · blockDim.x in registers (up to 32 each),
//           longer rows stride through memory
// Numerics  f32 partial sums, reduced by block_sum (warp shuffles, then shared memory)
// add_rms_norm  x[r, :] += y[r, :], then rms_norm of the sum into dst: the same adds and the same sums
//               in the same order as add_assign then rms_norm, so the same bits, one launch fewer

// One row per block, its values held in registers: each thread loads all of its VPT values of x
// (and y, gain) before using any, so the row costs one memory round trip instead of one per
// blockDim.x values (a strided loop that stores x between loads cannot start the next loads
// early). Each thread sums its squares in index order, as norm_row_loop does: the same bits.
template <bool ADD, int VPT>
__device__ __forceinline__ void norm_row_regs(float* __restrict__ x, const float* __restrict__ y,
                                              const float* __restrict__ gain, float* __restrict__ dst, u32 d,
                                              float eps) {
    const u64 row_start = (u64)blockIdx.x * d;
    float v[VPT], a[VPT], g[VPT];
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        const u32 i = threadIdx.x + j * blockDim.x;
        v[j] = i < d ? x[row_start + i] : 0.0f;
        a[j] = ADD && i < d ? y[row_start + i] : 0.0f;
        g[j] = i < d ? gain[i] : 0.0f;
    }
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        const u32 i = threadIdx.x + j * blockDim.x;
        if (i < d) {
            if (ADD) {
                v[j] += a[j];
                x[row_start + i] = v[j];
            }
            sum_sq += v[j] * v[j];
        }
    }
    sum_sq = block_sum(sum_sq);
    const float scale = rsqrtf(sum_sq / (float)d + eps);
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        const u32 i = threadIdx.x + j * blockDim.x;
        if (i < d) dst[row_start + i] = v[j] * scale * g[j];
    }
}

// Rows longer than 32 values per thread: a strided loop. Each thread rereads only the x values it
// wrote itself.
template <bool ADD>
__device__ __forceinline__ void norm_row_loop(float* x, const float* y, const float* gain, float* dst, u32 d,
                                              float eps) {
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

// x (+= y when ADD), then dst = x · gain / rms(x), for the block's row: the register version sized
// to the row (a block-uniform choice), else the loop.
template <bool ADD>
__device__ __forceinline__ void norm_row(float* x, const float* y, const float* gain, float* dst, u32 d, float eps) {
    const u32 per_thread = (d + blockDim.x - 1) / blockDim.x;
    if (per_thread <= 4) norm_row_regs<ADD, 4>(x, y, gain, dst, d, eps);
    else if (per_thread <= 8) norm_row_regs<ADD, 8>(x, y, gain, dst, d, eps);
    else if (per_thread <= 16) norm_row_regs<ADD, 16>(x, y, gain, dst, d, eps);
    else if (per_thread <= 32) norm_row_regs<ADD, 32>(x, y, gain, dst, d, eps);
    else norm_row_loop<ADD>(x, y, gain, dst, d, eps);
}

extern "C" __global__ void rms_norm(const float* x, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<false>((float*)x, nullptr, gain, dst, d, eps);  // ADD = false: x is only read
}

extern "C" __global__ void add_rms_norm(float* x, const float* y, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<true>(x, y, gain, dst, d, eps);
}
