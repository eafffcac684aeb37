// attention  dst[t, h] = Σ_{j0 ≤ j ≤ pos[t]} softmax_j(scale · q[t, h] · K[j, h/g]) · V[j, h/g], K and V read through
//            the block table: slot(j) = block_table[seq[t]][j / block_size] · block_size + j % block_size;
//            j0 = first_key(pos[t], window) (common.cuh; 0 without a window): keys before it are never read
// Layout     q, dst: [n_tokens, n_heads · head_dim] f32; cache_k, cache_v: [n_slots, n_kv_heads · head_dim] f32, or
//            f16 for the entries named *_f16; with xq non-null also dst's two int8 planes (quantize_q8_1.cu, joined
//            before this file; head_dim % 32 == 0), written as each head is finished;
//            partial: [n_tokens · n_heads][n_splits][2 + head_dim] = (max, sum, unnormalized output);
//            done: u32 [n_tokens · n_kv_heads · n_chunks] split counters, zero between launches
// Launch     attention_<HD> (HEADS = 4) and attention_h1_<HD> (HEADS = 1), HD ≥ head_dim: grid (n_tokens · n_kv_heads · n_chunks,
//            n_splits), 4 warps. A block serves one token and up to HEADS query heads of one KV head (a chunk
//            of its g = n_heads / n_kv_heads heads; n_chunks = ceil(g / HEADS)): each K and V row is loaded
//            once for all of them (GQA reuse). attention_h1_<HD> is for few tokens, where 4× more blocks fill the GPU.
//            Split s takes keys j ≡ s (mod n_splits), each warp every 4th of those (flash-decoding), two keys in flight; the
//            last split block of a (token, chunk) to finish merges the splits (one launch, no combine
//            kernel); indices outside the block table or the cache are skipped, never read
// Numerics   an f16 cache's values are widened exactly, the rest as for f32;
//            f32 online softmax per warp and head (running max, rescaled sums), merged by max-rescaling;
//            head_dim ≤ 256. A head's arithmetic does not depend on which other heads share its block.

#define ATT_WARPS 4

// Output value d of a head whose first value is dst[i0]: dst[i0 + d] = v, and with planes (q8.xq) its
// lane of the planes' block: head_dim % 32 == 0 (the caller's rule), so each warp's 32 values of the
// loops below are one block, and every lane of the warp calls.
__device__ __forceinline__ void head_out(float v, float* dst, u64 i0, u32 d, Q8Out q8) {
    dst[i0 + d] = v;
    if (q8.xq) quantize_q8_1_lane(v, i0 + d, q8.total, q8.xq, q8.xds);
}

// Merges one (token, head)'s split partials by max-rescaling into dst[i0 ..]. Other blocks wrote them:
// the loads go through L2 (__ldcg), never a stale L1 line.
__device__ void combine_splits(const float* base, float* dst, u64 i0, u32 head_dim, u32 n_splits, Q8Out q8) {
    const u32 stride = 2 + head_dim;
    float m = -1e30f;
    for (u32 s = 0; s < n_splits; s++) m = fmaxf(m, __ldcg(base + s * stride));
    float l = 0.0f;
    for (u32 s = 0; s < n_splits; s++) l += __ldcg(base + s * stride + 1) * expf(__ldcg(base + s * stride) - m);
    for (u32 d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.0f;
        for (u32 s = 0; s < n_splits; s++) a += __ldcg(base + s * stride + 2 + d) * expf(__ldcg(base + s * stride) - m);
        head_out(l > 0.0f ? a / l : 0.0f, dst, i0, d, q8);
    }
}

// What a flash-decoding block serves: grid.x is (token t, KV head, chunk of up to HEADS of its g query heads), grid.y
// the split; h0 is the block's first query head, nh how many it has (≤ HEADS).
struct SplitBlock {
    u32 grp, t, split, kv_head, h0, nh;
};
template <int HEADS>
__device__ __forceinline__ SplitBlock split_block(u32 n_heads, u32 n_kv_heads) {
    const u32 g = n_heads / n_kv_heads, n_chunks = (g + HEADS - 1) / HEADS, grp = blockIdx.x;
    const u32 kv_head = grp / n_chunks % n_kv_heads, chunk = grp % n_chunks;
    return {grp, grp / (n_kv_heads * n_chunks), blockIdx.y, kv_head, kv_head * g + chunk * HEADS,
            min((u32)HEADS, g - chunk * HEADS)};
}

// The cache row of key j (block table lookup), or none: past the table or outside the cache.
__device__ __forceinline__ bool key_slot(const u32* table, u32 j, u32 block_size, u32 max_blocks, u32 n_slots,
                                         u64& slot) {
    if (j / block_size >= max_blocks) return false;
    slot = (u64)table[j / block_size] * block_size + j % block_size;
    return slot < n_slots;
}

// Lane's DPL dims (d = lane + 32 i) of one cache row, widened to f32; dims past head_dim read as 0.
template <int DPL, typename KV>
__device__ __forceinline__ void load_row(const KV* row, u32 lane, u32 head_dim, float (&r)[DPL]) {
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const u32 d = lane + 32 * i;
        r[i] = d < head_dim ? kv_load(row, d) : 0.0f;
    }
}

// One key's step of the online softmax for each of the block's nh heads: score, rescale, accumulate.
template <int ATT_HEADS, int DPL>
__device__ __forceinline__ void attend_key(const float (&qr)[ATT_HEADS][DPL], const float (&kk)[DPL],
                                           const float (&vv)[DPL], float (&acc)[ATT_HEADS][DPL],
                                           float (&run_max)[ATT_HEADS], float (&run_sum)[ATT_HEADS], u32 nh,
                                           u32 lane, u32 head_dim) {
#pragma unroll
    for (int hh = 0; hh < ATT_HEADS; hh++) {
        if (hh >= nh) break;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            if (lane + 32 * i < head_dim) dot += qr[hh][i] * kk[i];
        }
        dot = warp_sum(dot);
        const float new_max = fmaxf(run_max[hh], dot);
        const float corr = expf(run_max[hh] - new_max), p = expf(dot - new_max);
        run_sum[hh] = run_sum[hh] * corr + p;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            if (lane + 32 * i < head_dim) acc[hh][i] = acc[hh][i] * corr + p * vv[i];
        }
        run_max[hh] = new_max;
    }
}

// After every warp wrote its running (max, sum, output) per head to shared memory (and a __syncthreads):
// merges the warps by max-rescaling, then writes dst (one split) or this split's partial, and the last
// split block of the (token, chunk) to finish merges all splits (one launch, no combine kernel).
template <int ATT_HEADS, int DPL>
__device__ __forceinline__ void finish_block(const float (&s_max)[ATT_WARPS][ATT_HEADS],
                                             const float (&s_sum)[ATT_WARPS][ATT_HEADS],
                                             const float (&s_acc)[ATT_WARPS][ATT_HEADS][32 * DPL], float* dst,
                                             float* partial, u32* done, u32 grp, u32 t, u32 h0, u32 nh, u32 n_heads,
                                             u32 head_dim, u32 split, u32 n_splits, Q8Out q8) {
    for (u32 hh = 0; hh < nh; hh++) {
        const u64 th = (u64)t * n_heads + h0 + hh;  // the (token, head) pair
        float m = s_max[0][hh];
        for (int w = 1; w < ATT_WARPS; w++) m = fmaxf(m, s_max[w][hh]);
        float l = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) l += s_sum[w][hh] * expf(s_max[w][hh] - m);
        float* out = partial + (th * n_splits + split) * (2 + head_dim);
        for (u32 d = threadIdx.x; d < head_dim; d += blockDim.x) {
            float a = 0.0f;
            for (int w = 0; w < ATT_WARPS; w++) a += s_acc[w][hh][d] * expf(s_max[w][hh] - m);
            if (n_splits == 1) head_out(l > 0.0f ? a / l : 0.0f, dst, th * head_dim, d, q8);
            else out[2 + d] = a;
        }
        if (n_splits > 1 && threadIdx.x == 0) {
            out[0] = m;
            out[1] = l;
        }
    }
    if (n_splits == 1) return;
    // The last split block of this (token, chunk) to finish merges all splits: every thread's
    // partial writes are made visible device-wide before the block is counted.
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&done[grp], 1u) == n_splits - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (threadIdx.x == 0) done[grp] = 0;  // zero again for the next launch (or graph replay)
    for (u32 hh = 0; hh < nh; hh++) {
        const u64 th = (u64)t * n_heads + h0 + hh;
        combine_splits(partial + th * n_splits * (2 + head_dim), dst, th * head_dim, head_dim, n_splits, q8);
    }
}

// DPL = dims per lane (head_dim ≤ 32 · DPL): registers for q and the accumulators scale with it, so a
// head_dim of 64 or 128 does not pay for 256's.
template <int ATT_HEADS, int DPL, typename KV>  // query heads per block, dims per lane, the cache's element type
__device__ __forceinline__ void attention_body(const float* q, const KV* cache_k, const KV* cache_v,
                                               const u32* seq, const u32* pos, const u32* block_table, float* dst,
                                               float* partial, u32* done, u32 n_heads, u32 n_kv_heads,
                                               u32 head_dim, float scale, u32 block_size, u32 max_blocks,
                                               u32 n_splits, u32 n_seqs, u32 n_slots, u32 window, Q8Out q8) {
    __shared__ float s_max[ATT_WARPS][ATT_HEADS], s_sum[ATT_WARPS][ATT_HEADS];
    __shared__ float s_acc[ATT_WARPS][ATT_HEADS][32 * DPL];
    const auto [grp, t, split, kv_head, h0, nh] = split_block<ATT_HEADS>(n_heads, n_kv_heads);
    const u32 kv_dim = n_kv_heads * head_dim;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 sq = seq[t];
    const u32* table = block_table + (u64)(sq < n_seqs ? sq : 0) * max_blocks;
    const u32 last = sq < n_seqs ? pos[t] : 0xffffffffu;  // a bad seq attends to nothing (zeros)
    float qr[ATT_HEADS][DPL], acc[ATT_HEADS][DPL];
    float run_max[ATT_HEADS], run_sum[ATT_HEADS];  // finite start: empty splits merge without NaN
#pragma unroll
    for (int hh = 0; hh < ATT_HEADS; hh++) {
        const float* qh = q + ((u64)t * n_heads + h0 + hh) * head_dim;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const u32 d = lane + 32 * i;
            qr[hh][i] = hh < nh && d < head_dim ? qh[d] * scale : 0.0f;
            acc[hh][i] = 0.0f;
        }
        run_max[hh] = -1e30f;
        run_sum[hh] = 0.0f;
    }
    // This warp's keys are j ≡ off (mod stride): the first of them at or after the window's start.
    const u32 off = split + n_splits * warp, stride = n_splits * ATT_WARPS;
    const u32 lo = last != 0xffffffffu ? first_key(last, window) : 0;
    const u32 j_start = lo <= off ? off : off + (lo - off + stride - 1) / stride * stride;
    const u64 head_off = (u64)kv_head * head_dim;
    // Two keys per step, both rows loaded before either is used: two memory round trips in flight per
    // warp instead of one. The keys are still taken in order (j, then j + stride), so the arithmetic,
    // and the bits, are those of one key per step.
    for (u32 j = j_start; j <= last && last != 0xffffffffu; j += 2 * stride) {
        u64 slot_a, slot_b = 0;
        if (!key_slot(table, j, block_size, max_blocks, n_slots, slot_a)) break;
        const bool has_b = j + stride <= last && key_slot(table, j + stride, block_size, max_blocks, n_slots, slot_b);
        float ka[DPL], va[DPL], kb[DPL], vb[DPL];
        load_row<DPL>(cache_k + slot_a * kv_dim + head_off, lane, head_dim, ka);
        load_row<DPL>(cache_v + slot_a * kv_dim + head_off, lane, head_dim, va);
        load_row<DPL>(cache_k + slot_b * kv_dim + head_off, lane, has_b ? head_dim : 0, kb);
        load_row<DPL>(cache_v + slot_b * kv_dim + head_off, lane, has_b ? head_dim : 0, vb);
        attend_key<ATT_HEADS, DPL>(qr, ka, va, acc, run_max, run_sum, nh, lane, head_dim);
        if (!has_b) break;  // past the last key, the table or the cache: the next step would stop too
        attend_key<ATT_HEADS, DPL>(qr, kb, vb, acc, run_max, run_sum, nh, lane, head_dim);
    }
#pragma unroll
    for (int hh = 0; hh < ATT_HEADS; hh++) {
        if (lane == 0) {
            s_max[warp][hh] = run_max[hh];
            s_sum[warp][hh] = run_sum[hh];
        }
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const u32 d = lane + 32 * i;
            if (d < head_dim) s_acc[warp][hh][d] = acc[hh][i];
        }
    }
    __syncthreads();
    finish_block<ATT_HEADS, DPL>(s_max, s_sum, s_acc, dst, partial, done, grp, t, h0, nh, n_heads, head_dim, split,
                                 n_splits, q8);
}

// A flash-decoding entry, this file's or attention_batch.cu's (the same arguments, Layout above): every argument
// passed on to BODY, a parenthesized body template such as (attention_body<4, 2, float>); xq, xds, q8_total: dst's
// int8 planes (quantize_q8_1.cu) for the o projection's GEMV, written as each head is finished, or xq null.
#define SPLIT_ATTENTION_ENTRY(NAME, KV, MIN_BLOCKS, BODY)                                                       \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS)                                               \
        NAME(const float* q, const KV* cache_k, const KV* cache_v, const u32* seq, const u32* pos,              \
             const u32* block_table, float* dst, float* partial, u32* done, u32 n_heads, u32 n_kv_heads,        \
             u32 head_dim, float scale, u32 block_size, u32 max_blocks, u32 n_splits, u32 n_seqs, u32 n_slots,  \
             u32 window, signed char* xq, float2* xds, u64 q8_total) {                                          \
        GRID_DEPENDENCY_WAIT();                                                                                  \
        BODY(q, cache_k, cache_v, seq, pos, block_table, dst, partial, done, n_heads, n_kv_heads, head_dim, scale, \
             block_size, max_blocks, n_splits, n_seqs, n_slots, window, Q8Out{xq, xds, q8_total});             \
    }
#define ATTENTION_ENTRY(NAME, HEADS, DPL, KV, MIN_BLOCKS) \
    SPLIT_ATTENTION_ENTRY(NAME, KV, MIN_BLOCKS, (attention_body<HEADS, DPL, KV>))
// attention_<HD>: up to 4 heads per block; attention_h1_<HD>: one; HD ≥ head_dim (64, 128 or 256). At least 8 blocks
// per SM (≤ 64 registers a thread) up to 128 dims: a warp waits on each key's shuffle-sum and softmax chain, so
// resident warps, not loads in flight, set the pace (B = 32 / 64 on llama-8b +2%; 4 or 8 keys in flight per warp were
// slower: benches/notes/cuda.md, v24). 256 dims holds 2 · 8 floats of q and acc per head and lane: 4 blocks.
// Each entry with its f16-cache twin (NAME_f16).
#define ATTENTION_ENTRIES(NAME, HEADS, DPL, MIN_BLOCKS)    \
    ATTENTION_ENTRY(NAME, HEADS, DPL, float, MIN_BLOCKS) \
    ATTENTION_ENTRY(NAME##_f16, HEADS, DPL, u16, MIN_BLOCKS)
ATTENTION_ENTRIES(attention_64, 4, 2, 8)
ATTENTION_ENTRIES(attention_128, 4, 4, 8)
ATTENTION_ENTRIES(attention_256, 4, 8, 4)
ATTENTION_ENTRIES(attention_h1_64, 1, 2, 8)
ATTENTION_ENTRIES(attention_h1_128, 1, 4, 8)
ATTENTION_ENTRIES(attention_h1_256, 1, 8, 4)
