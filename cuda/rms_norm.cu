// rms_norm  dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout    x, dst: [n_rows, d] row-major f32; gain: [d]
// Launch    one block per row; thread t holds values t + j · blockDim.x in registers (up to 32 each),
//           longer rows stride through memory
// Numerics  f32 partial sums, reduced by block_sum (warp shuffles, then shared memory)
// add_rms_norm  x[r, :] += y[r, :], then rms_norm of the sum into dst: the same adds and the same sums
//               in the same order as add_assign then rms_norm, so the same bits, one launch fewer
// rms_norm_q8, add_rms_norm_q8  the same, and also dst's two int8 planes for the decode GEMV that reads
//               dst next (quantize_q8_1.cu's layout and bits, joined before this file), saving its
//               quantize launch; d % 32 == 0; dynamic shared memory of d floats: the normed row is
//               staged there, then QUANT_LANES lanes quantize each 32-value block (quantize_row_q8)

// Lanes per 32-value block of the planes in quantize_row_q8: each holds 8 consecutive values, so a
// reduction is 7 local steps and two shuffles (one lane per value, as quantize_q8_1, needs five
// shuffles per reduction and a whole warp per block; for a 4,096-wide row in one block that chain
// ran 16 times per thread).
#define QUANT_LANES 4
#define QUANT_VALUES (32 / QUANT_LANES)

__device__ __forceinline__ float group_max(float v) {
#pragma unroll
    for (int o = QUANT_LANES / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = QUANT_LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// One plane of QUANT_VALUES values: q = round(v / d), d = max|v| / 127 over the group's block (as
// quantize_q8_1_lane computes it, the same expressions), packed as 8 bytes; returns (d, d · Σ q).
__device__ __forceinline__ float2 quantize_part(const float (&v)[QUANT_VALUES], float (&q)[QUANT_VALUES], uint2& packed) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < QUANT_VALUES; j++) amax = fmaxf(amax, fabsf(v[j]));
    amax = group_max(amax);
    const float d = amax / 127.0f;
    float s = 0.0f;
    u32 bytes[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < QUANT_VALUES; j++) {
        q[j] = amax == 0.0f ? 0.0f : rintf(v[j] / d);
        s += q[j];
        bytes[j / 4] |= ((u32)(int)q[j] & 0xffu) << (8 * (j % 4));
    }
    packed = make_uint2(bytes[0], bytes[1]);
    return make_float2(d, d * group_sum(s));
}

// Writes the planes of one row (its first value is value row_start of the planes) from the normed
// row staged in s_row: group g of QUANT_LANES lanes takes block g. Every thread of the block calls
// (the shuffles need whole warps).
__device__ void quantize_row_q8(const float* s_row, u32 d, u64 row_start, Q8Out q8) {
    const u32 n_groups = d / 32 * QUANT_LANES;
    for (u32 base = 0; base < n_groups; base += blockDim.x) {
        const u32 t = base + threadIdx.x;
        const bool active = t < n_groups;
        const u32 first = t * QUANT_VALUES;  // the lane's first value in the row
        float v[QUANT_VALUES], q[QUANT_VALUES], r[QUANT_VALUES], q2[QUANT_VALUES];
#pragma unroll
        for (int j = 0; j < QUANT_VALUES; j++) v[j] = active ? s_row[first + j] : 0.0f;
        uint2 p1, p2;
        const float2 ds1 = quantize_part(v, q, p1);
#pragma unroll
        for (int j = 0; j < QUANT_VALUES; j++) r[j] = v[j] - ds1.x * q[j];
        const float2 ds2 = quantize_part(r, q2, p2);
        if (!active) continue;
        const u64 i = row_start + first;
        *(uint2*)(q8.xq + i) = p1;
        *(uint2*)(q8.xq + q8.total + i) = p2;
        if (t % QUANT_LANES == 0) {
            q8.xds[i / 32] = ds1;
            q8.xds[q8.total / 32 + i / 32] = ds2;
        }
    }
}

// Output value i (of the row; row_start + i of dst): dst's value, and with Q8 also the staged copy.
template <bool Q8>
__device__ __forceinline__ void norm_out(float v, u64 row_start, u32 i, float* dst, float* s_row) {
    dst[row_start + i] = v;
    if (Q8) s_row[i] = v;
}

// With Q8, the planes of the row staged by norm_out.
template <bool Q8>
__device__ __forceinline__ void norm_planes(const float* s_row, u32 d, u64 row_start, Q8Out q8) {
    if (!Q8) return;
    __syncthreads();
    quantize_row_q8(s_row, d, row_start, q8);
}

// One row per block, its values held in registers: each thread loads all of its VPT values of x
// (and y, gain) before using any, so the row costs one memory round trip instead of one per
// blockDim.x values (a strided loop that stores x between loads cannot start the next loads
// early). Each thread sums its squares in index order, as norm_row_loop does: the same bits.
template <bool ADD, bool Q8, int VPT>
__device__ __forceinline__ void norm_row_regs(float* __restrict__ x, const float* __restrict__ y,
                                              const float* __restrict__ gain, float* __restrict__ dst, u32 d,
                                              float eps, Q8Out q8, float* s_row) {
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
        if (i < d) norm_out<Q8>(v[j] * scale * g[j], row_start, i, dst, s_row);
    }
    norm_planes<Q8>(s_row, d, row_start, q8);
}

// Rows longer than 32 values per thread: a strided loop. Each thread rereads only the x values it
// wrote itself.
template <bool ADD, bool Q8>
__device__ __forceinline__ void norm_row_loop(float* x, const float* y, const float* gain, float* dst, u32 d,
                                              float eps, Q8Out q8, float* s_row) {
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
    for (u32 i = threadIdx.x; i < d; i += blockDim.x) {
        norm_out<Q8>(x[row_start + i] * scale * gain[i], row_start, i, dst, s_row);
    }
    norm_planes<Q8>(s_row, d, row_start, q8);
}

// x (+= y when ADD), then dst = x · gain / rms(x), for the block's row: the register version sized
// to the row (a block-uniform choice), else the loop.
template <bool ADD, bool Q8>
__device__ __forceinline__ void norm_row(float* x, const float* y, const float* gain, float* dst, u32 d, float eps,
                                         Q8Out q8, float* s_row) {
    const u32 per_thread = (d + blockDim.x - 1) / blockDim.x;
    if (per_thread <= 4) norm_row_regs<ADD, Q8, 4>(x, y, gain, dst, d, eps, q8, s_row);
    else if (per_thread <= 8) norm_row_regs<ADD, Q8, 8>(x, y, gain, dst, d, eps, q8, s_row);
    else if (per_thread <= 16) norm_row_regs<ADD, Q8, 16>(x, y, gain, dst, d, eps, q8, s_row);
    else if (per_thread <= 32) norm_row_regs<ADD, Q8, 32>(x, y, gain, dst, d, eps, q8, s_row);
    else norm_row_loop<ADD, Q8>(x, y, gain, dst, d, eps, q8, s_row);
}

extern "C" __global__ void rms_norm(const float* x, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<false, false>((float*)x, nullptr, gain, dst, d, eps, Q8Out{}, nullptr);  // ADD = false: x is only read
}

extern "C" __global__ void add_rms_norm(float* x, const float* y, const float* gain, float* dst, u32 d, float eps) {
    GRID_DEPENDENCY_WAIT();
    norm_row<true, false>(x, y, gain, dst, d, eps, Q8Out{}, nullptr);
}

// total = rows · d: the planes' size (quantize_q8_1.cu's layout).
extern "C" __global__ void rms_norm_q8(const float* x, const float* gain, float* dst, u32 d, float eps,
                                       signed char* xq, float2* xds, u64 total) {
    GRID_DEPENDENCY_WAIT();
    extern __shared__ float s_row[];  // d floats
    norm_row<false, true>((float*)x, nullptr, gain, dst, d, eps, Q8Out{xq, xds, total}, s_row);
}

extern "C" __global__ void add_rms_norm_q8(float* x, const float* y, const float* gain, float* dst, u32 d, float eps,
                                           signed char* xq, float2* xds, u64 total) {
    GRID_DEPENDENCY_WAIT();
    extern __shared__ float s_row[];
    norm_row<true, true>(x, y, gain, dst, d, eps, Q8Out{xq, xds, total}, s_row);
}
