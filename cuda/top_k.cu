// top_k     ids[r] = the k largest x[r, :], descending, lowest index on ties; vals[r, i] = x[r, ids[r, i]],
//           vals[r, k] = ln Σ_j exp(x[r, j]); NaN counts as −∞ and +∞ as FLT_MAX (the sampler's rule)
// Layout    x: [rows, vocab] f32; ids: u32 [rows, k]; vals: f32 [rows, k + 1]; 1 ≤ k ≤ 256
// Launch    one block of TOP_K_THREADS per row: radix select of the k-th largest key (4 passes of 8 bits over a
//           256-bin shared histogram), stable compaction of the k winners, rank sort (shaders/top_k.wgsl's algorithm)
// Numerics  selection on exact order-preserving u32 keys; log-sum-exp in f32 (expf, logf): per-thread running
//           max and sum, merged by warp shuffles, then across warps

#define TOP_K_THREADS 1024  // the launcher's block size (src/backend/cuda/sampling.rs); sizes the shared arrays
#define TOP_K_MAX 256       // MAX_TOP_K
#define TOP_K_BINS 256
#define NEG_INF_KEY 0x007fffffu  // top_k_key(−∞): every NaN and −∞ maps here, below every finite value

// The sanitized value's order-preserving key: a > b ⇔ key(a) > key(b). NaN → −∞, +∞ → FLT_MAX and
// −0 → +0 (so ±0 tie, as in the sampler), on the bits like the WGSL version.
__device__ __forceinline__ u32 top_k_key(float v) {
    u32 b = __float_as_uint(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) b = 0xff800000u;
    else if (b == 0x7f800000u) b = 0x7f7fffffu;
    else if (b == 0x80000000u) b = 0u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float top_k_value(u32 key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// exp(v − m) for v ≤ m, with the argument kept finite (v − m may overflow near ±FLT_MAX).
__device__ __forceinline__ float top_k_weight(float v, float m) { return expf(fmaxf(v - m, -104.0f)); }

// Merges a (max, sum scaled to max) pair into (m, s); s = 0 means no finite value yet.
__device__ __forceinline__ void lse_merge(float& m, float& s, float m2, float s2) {
    const float mm = fmaxf(m, m2);
    s = s * top_k_weight(m, mm) + s2 * top_k_weight(m2, mm);
    m = mm;
}

// ln Σ exp over the row; the result is valid in thread 0 only. Threads stride the row (coalesced).
__device__ float top_k_lse(const float* row, u32 vocab) {
    __shared__ float sm[32], ss[32];
    float m = -__int_as_float(0x7f7fffff), s = 0.0f;  // m starts at −FLT_MAX, not −∞: no ∞ − ∞
    for (u32 j = threadIdx.x; j < vocab; j += TOP_K_THREADS) {
        const u32 key = top_k_key(row[j]);
        if (key == NEG_INF_KEY) continue;
        const float v = top_k_value(key);
        if (v > m) {
            s = s * top_k_weight(m, v) + 1.0f;
            m = v;
        } else {
            s += top_k_weight(v, m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) lse_merge(m, s, __shfl_xor_sync(FULL_MASK, m, o), __shfl_xor_sync(FULL_MASK, s, o));
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = sm[lane];  // TOP_K_THREADS = 1024: exactly 32 warps
        s = ss[lane];
        for (int o = 16; o > 0; o >>= 1) lse_merge(m, s, __shfl_xor_sync(FULL_MASK, m, o), __shfl_xor_sync(FULL_MASK, s, o));
    }
    return s == 0.0f ? -INFINITY : m + logf(s);
}

struct TopKSelect {
    u32 want;  // the digits of the k-th largest key found so far, in place
    u32 mask;  // which bits of want are found
    u32 left;  // how many of the top k are still to find at or below want
};

// Finds the k-th largest key one byte per pass, from the top: the digit whose bin holds the k-th largest
// of the keys that match the digits found so far. Afterwards sel->want is that key and sel->left how many
// keys equal to it belong to the top k (the rest of the top k are above it).
__device__ void top_k_select(const float* row, u32 vocab, u32 k, TopKSelect* sel) {
    __shared__ u32 hist[TOP_K_BINS];
    if (threadIdx.x == 0) *sel = {0u, 0u, k};
    for (int pass = 0; pass < 4; pass++) {
        const u32 shift = 24 - 8 * pass;
        if (threadIdx.x < TOP_K_BINS) hist[threadIdx.x] = 0;
        __syncthreads();
        const u32 want = sel->want, mask = sel->mask;
        for (u32 j = threadIdx.x; j < vocab; j += TOP_K_THREADS) {
            const u32 key = top_k_key(row[j]);
            if ((key & mask) == want) atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            // 256 steps on one thread, against vocab / TOP_K_THREADS loads per thread above.
            u32 left = sel->left, d = TOP_K_BINS - 1;
            for (; d > 0; d--) {
                if (hist[d] >= left) break;
                left -= hist[d];
            }
            *sel = {want | (d << shift), mask | (0xffu << shift), left};
        }
        __syncthreads();  // publishes sel, and keeps the next pass from clearing hist while it is read
    }
}

// Inclusive prefix sums of above[] and ties[] over the threads (Hillis–Steele, as in the WGSL version).
__device__ void top_k_scan(u32* above, u32* ties) {
    for (u32 off = 1; off < TOP_K_THREADS; off <<= 1) {
        const u32 a = threadIdx.x >= off ? above[threadIdx.x - off] : 0u;
        const u32 e = threadIdx.x >= off ? ties[threadIdx.x - off] : 0u;
        __syncthreads();
        above[threadIdx.x] += a;
        ties[threadIdx.x] += e;
        __syncthreads();
    }
}

// Writes the top k into (cand_key, cand_idx): the keys above the threshold, then the first sel.left keys
// equal to it. Each thread takes a contiguous chunk of the row, so a prefix sum of the threads' counts
// gives every winner its place and the ties kept are those of the lowest indices, whatever the timing.
__device__ void top_k_compact(const float* row, u32 vocab, u32 k, const TopKSelect* sel, u32* cand_key,
                              u32* cand_idx) {
    __shared__ u32 above[TOP_K_THREADS], ties[TOP_K_THREADS];
    const u32 threshold = sel->want, need = sel->left, n_above = k - need;
    const u32 chunk = (u32)(((u64)vocab + TOP_K_THREADS - 1) / TOP_K_THREADS);
    const u32 lo = (u32)min((u64)threadIdx.x * chunk, (u64)vocab), hi = (u32)min((u64)lo + chunk, (u64)vocab);
    u32 a = 0, e = 0;
    for (u32 j = lo; j < hi; j++) {
        const u32 key = top_k_key(row[j]);
        a += key > threshold;
        e += key == threshold;
    }
    above[threadIdx.x] = a;
    ties[threadIdx.x] = e;
    __syncthreads();
    top_k_scan(above, ties);
    u32 pa = above[threadIdx.x] - a, pe = ties[threadIdx.x] - e;  // exclusive: this thread's first places
    if (a == 0 && (e == 0 || pe >= need)) return;                // nothing of this chunk is kept
    for (u32 j = lo; j < hi; j++) {
        const u32 key = top_k_key(row[j]);
        if (key > threshold) {
            if (pa < n_above) {  // always true; a guard against writing past the k places
                cand_key[pa] = key;
                cand_idx[pa] = j;
            }
            pa++;
        } else if (key == threshold && pe < need) {
            cand_key[n_above + pe] = key;
            cand_idx[n_above + pe] = j;
            pe++;
        }
    }
}

extern "C" __global__ void __launch_bounds__(TOP_K_THREADS) top_k(const float* x, u32* ids, float* vals, u32 vocab,
                                                                  u32 k) {
    GRID_DEPENDENCY_WAIT();
    __shared__ TopKSelect sel;
    __shared__ u32 cand_key[TOP_K_MAX], cand_idx[TOP_K_MAX];
    // Uniform across the block, so no thread skips a barrier the others wait at.
    if (blockDim.x != TOP_K_THREADS || k == 0 || k > TOP_K_MAX || k > vocab) return;
    const float* row = x + (u64)blockIdx.x * vocab;
    const float lse = top_k_lse(row, vocab);
    top_k_select(row, vocab, k, &sel);
    top_k_compact(row, vocab, k, &sel, cand_key, cand_idx);
    __syncthreads();
    if (threadIdx.x < k) {
        // A winner's place is how many winners beat it: a higher key, or the same key at a lower index.
        const u32 key = cand_key[threadIdx.x], idx = cand_idx[threadIdx.x];
        u32 r = 0;
        for (u32 i = 0; i < k; i++) r += cand_key[i] > key || (cand_key[i] == key && cand_idx[i] < idx);
        ids[(u64)blockIdx.x * k + r] = idx;
        vals[(u64)blockIdx.x * (k + 1) + r] = top_k_value(key);
    }
    if (threadIdx.x == 0) vals[(u64)blockIdx.x * (k + 1) + k] = lse;
}
