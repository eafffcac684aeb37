// attention_batch  attention (formula and cache layout in attention.cu) for decode batches of many sequences:
//                  flash-decoding with keys taken in chunks of 8, so a warp scores 8 keys × 4 heads at once
// Layout   as attention.cu: q, dst [n_tokens, n_heads · head_dim] f32; cache f32 (attention_batch_<HD>) or f16
//          (attention_batch_<HD>_f16); partial [n_tokens · n_heads][n_splits][2 + head_dim]; done u32 per grid.x,
//          zero between launches
// Launch   grid (n_tokens · n_kv_heads · n_chunks, n_splits), 4 warps: a block serves one token and up to 4 query
//          heads of one KV head (n_chunks = ceil(g / 4)), sharing each K/V row load among them. Keys come in chunks
//          of 8 positions, [8c, 8c + 8): chunk c goes to split c mod n_splits and, in it, to warp
//          (c / n_splits) mod 4, fixed by position alone. A lane holds HD / 32 consecutive dims of q, of each
//          key's K and V row (vector loads) and of the output. The last split block to finish merges the splits
//          (finish_block, attention.cu); keys outside the window, the block table or the cache are never read.
// Numerics f32. Per chunk a lane sums its dims' q · k products for the 32 (key, head) pairs, and one transposing
//          butterfly (31 shuffles, fixed order) leaves pair lane's full score in lane; one online-softmax step per
//          chunk (per-head max over its 8 keys, expf once per pair), then Σ p · v in key order. A head's arithmetic
//          does not depend on the other heads of its block.
//
// attention.cu's kernel runs one key's dependent chain at a time (5 shuffles per head, then the softmax
// update); here the chain is paid once per 8 keys, with a chunk's 8 V rows and (f16 cache) the next chunk's 8 K rows
// in flight meanwhile (benches/notes/cuda.md, v25).

#define AB_KEYS 8   // keys per chunk
#define AB_HEADS 4  // query heads per block: AB_KEYS · AB_HEADS = 32 pairs, one per lane

// Lane's DPL consecutive dims of one cache row as loaded, in 32-bit words (two halves each for an f16 cache):
// widened to f32 only where used, so a chunk's 16 rows in flight take half the registers.
template <int DPL, typename KV>
struct Dims {
    u32 w[DPL * sizeof(KV) / 4];
    __device__ __forceinline__ float at(int i) const {
        if constexpr (sizeof(KV) == 4) return __uint_as_float(w[i]);
        else return f16_to_f32((u16)(w[i / 2] >> (16 * (i % 2))));
    }
};

// Up to 16 bytes in one load.
template <int BYTES> struct Wide;
template <> struct Wide<4> { u32 x[1]; };
template <> struct __align__(8) Wide<8> { u32 x[2]; };
template <> struct __align__(16) Wide<16> { u32 x[4]; };

// Dims d0 .. d0 + DPL of a cache row: as 16-byte (or narrower) vector loads where `vec` (head_dim a multiple of
// DPL, so aligned and either all in the row or none), else element by element; dims past head_dim read as 0
// (head_dim 0: nothing is read).
template <int DPL, typename KV>
__device__ __forceinline__ void load_dims(const KV* row, u32 d0, u32 head_dim, bool vec, Dims<DPL, KV>& r) {
    constexpr int WORDS = DPL * sizeof(KV) / 4, PER = WORDS < 4 ? WORDS : 4;  // words per load
    if (vec && d0 < head_dim) {
        const u32* src = reinterpret_cast<const u32*>(row + d0);
#pragma unroll
        for (int i = 0; i < WORDS; i += PER) {
            const Wide<4 * PER> x = *reinterpret_cast<const Wide<4 * PER>*>(src + i);
#pragma unroll
            for (int e = 0; e < PER; e++) r.w[i + e] = x.x[e];
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) r.w[i] = 0;
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        if (d0 + i >= head_dim) break;
        if constexpr (sizeof(KV) == 4) r.w[i] = __float_as_uint(row[d0 + i]);
        else r.w[i / 2] |= (u32)row[d0 + i] << (16 * (i % 2));
    }
}

// One step of transpose_sum: keeps the half of v[0 .. 2·O) this lane's bit O selects, adding the other lane's.
template <int O>
__device__ __forceinline__ void transpose_step(float (&v)[32], u32 lane) {
    const bool upper = lane & O;
#pragma unroll
    for (int i = 0; i < O; i++) {
        const float send = upper ? v[i] : v[i + O], keep = upper ? v[i + O] : v[i];
        v[i] = keep + __shfl_xor_sync(FULL_MASK, send, O);
    }
}

// v[i] holds this lane's share of pair i's sum; afterwards v[0] holds pair `lane`'s full sum: each step halves
// the pairs a lane keeps and exchanges the other half with the lane O away (a transposing reduction).
__device__ __forceinline__ float transpose_sum(float (&v)[32], u32 lane) {
    transpose_step<16>(v, lane);
    transpose_step<8>(v, lane);
    transpose_step<4>(v, lane);
    transpose_step<2>(v, lane);
    transpose_step<1>(v, lane);
    return v[0];
}

// The cache rows of chunk c's keys; bit k of the result: key 8c + k is attended (in [lo, last], in the block
// table and the cache; the slot of one that is not is 0, never read). A block size that is a multiple of 8
// holds the whole chunk in one block: one table lookup.
__device__ __forceinline__ u32 chunk_slots(const u32* table, u32 c, u32 lo, u32 last, u32 block_size,
                                           u32 max_blocks, u32 n_slots, u32 (&slot)[AB_KEYS]) {
    const u32 j0 = c * AB_KEYS;
    u32 valid = 0;
    if (block_size % AB_KEYS == 0) {
        const u32 b = j0 / block_size;
        const u64 base = b < max_blocks ? (u64)table[b] * block_size + j0 % block_size : (u64)n_slots;
#pragma unroll
        for (int k = 0; k < AB_KEYS; k++) {
            const bool ok = j0 + k >= lo && j0 + k <= last && base + k < n_slots;
            slot[k] = ok ? (u32)(base + k) : 0;
            valid |= (u32)ok << k;
        }
        return valid;
    }
#pragma unroll
    for (int k = 0; k < AB_KEYS; k++) {
        u64 s = 0;
        const bool ok = j0 + k >= lo && j0 + k <= last && key_slot(table, j0 + k, block_size, max_blocks, n_slots, s);
        slot[k] = ok ? (u32)s : 0;
        valid |= (u32)ok << k;
    }
    return valid;
}

// Lane's dims of the chunk's attended rows of one cache side (zeros for the others, not read).
template <int DPL, typename KV>
__device__ __forceinline__ void load_rows(const KV* cache, const u32 (&slot)[AB_KEYS], u32 valid, u32 kv_dim,
                                          u64 head_off, u32 d0, u32 head_dim, bool vec, Dims<DPL, KV> (&r)[AB_KEYS]) {
#pragma unroll
    for (int k = 0; k < AB_KEYS; k++) {
        const u32 n = (valid >> k) & 1 ? head_dim : 0;  // an unattended row: no dims, nothing read
        load_dims<DPL>(cache + (u64)slot[k] * kv_dim + head_off, d0, n, vec, r[k]);
    }
}

template <int DPL, typename KV>  // dims per lane (head_dim ≤ 32 · DPL), the cache's element type
__device__ __forceinline__ void attention_batch_body(const float* q, const KV* cache_k, const KV* cache_v,
                                                     const u32* seq, const u32* pos, const u32* block_table,
                                                     float* dst, float* partial, u32* done, u32 n_heads,
                                                     u32 n_kv_heads, u32 head_dim, float scale, u32 block_size,
                                                     u32 max_blocks, u32 n_splits, u32 n_seqs, u32 n_slots,
                                                     u32 window, Q8Out q8) {
    __shared__ float s_max[ATT_WARPS][AB_HEADS], s_sum[ATT_WARPS][AB_HEADS];
    __shared__ float s_acc[ATT_WARPS][AB_HEADS][32 * DPL];
    // A chunk's probabilities, pair = key · 4 + head, read back as one float4 per key.
    __shared__ __align__(16) float s_p[ATT_WARPS][AB_KEYS * AB_HEADS];
    const auto [grp, t, split, kv_head, h0, nh] = split_block<AB_HEADS>(n_heads, n_kv_heads);
    const u32 kv_dim = n_kv_heads * head_dim;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d0 = DPL * lane, my_head = lane % AB_HEADS;
    const u32 sq = seq[t];
    const u32* table = block_table + (u64)(sq < n_seqs ? sq : 0) * max_blocks;
    // Keys past the block table are never attended: a hostile pos ends the loop there, not at 2^32.
    const u64 table_keys = (u64)max_blocks * block_size;
    const bool any = sq < n_seqs && table_keys > 0;  // a bad seq attends to nothing (zeros)
    const u32 last = any ? (u32)min((u64)pos[t], table_keys - 1) : 0, lo = first_key(any ? pos[t] : 0, window);
    const bool vec = head_dim % DPL == 0;
    float qr[AB_HEADS][DPL], acc[AB_HEADS][DPL], run_max[AB_HEADS];
#pragma unroll
    for (int hh = 0; hh < AB_HEADS; hh++) {
        const float* qh = q + ((u64)t * n_heads + h0 + hh) * head_dim;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            qr[hh][i] = hh < nh && d0 + i < head_dim ? qh[d0 + i] * scale : 0.0f;
            acc[hh][i] = 0.0f;
        }
        run_max[hh] = -1e30f;  // finite: empty warps and splits merge without NaN
    }
    float my_sum = 0.0f;  // Σ p of pair `lane` over this warp's chunks
    const u64 head_off = (u64)kv_head * head_dim;
    // This warp's chunks are c ≡ off (mod stride), from the first that holds a key at or after lo.
    const u32 off = split + n_splits * warp, stride = n_splits * ATT_WARPS, c_lo = lo / AB_KEYS;
    const u32 c_start = c_lo <= off ? off : off + (c_lo - off + stride - 1) / stride * stride;
    // With an f16 cache, a software pipeline: chunk c's V rows and the next chunk's K rows are in flight while c
    // is scored. An f32 cache's rows take twice the registers: each chunk's K and V are loaded together, at 4
    // blocks per SM (pipelined at 3 blocks it was slower).
    constexpr bool PIPE = sizeof(KV) == 2;
    const u32 c_end = any ? last / AB_KEYS : 0;
    u32 slot[AB_KEYS];  // PIPE: chunk c's at the top of its step
    Dims<DPL, KV> kk[AB_KEYS];
    u32 valid_next = 0;
    if (PIPE) {
        if (any && c_start <= c_end)
            valid_next = chunk_slots(table, c_start, lo, last, block_size, max_blocks, n_slots, slot);
        load_rows<DPL>(cache_k, slot, valid_next, kv_dim, head_off, d0, head_dim, vec, kk);
    }
    for (u32 c = c_start; any && c <= c_end; c += stride) {
        const u32 valid =  // bit k: key 8c + k is attended
            PIPE ? valid_next : chunk_slots(table, c, lo, last, block_size, max_blocks, n_slots, slot);
        Dims<DPL, KV> vv[AB_KEYS], kn[AB_KEYS];
        if (!PIPE) load_rows<DPL>(cache_k, slot, valid, kv_dim, head_off, d0, head_dim, vec, kk);
        load_rows<DPL>(cache_v, slot, valid, kv_dim, head_off, d0, head_dim, vec, vv);
        if (PIPE) {
            valid_next = c + stride <= c_end
                             ? chunk_slots(table, c + stride, lo, last, block_size, max_blocks, n_slots, slot)
                             : 0;
            load_rows<DPL>(cache_k, slot, valid_next, kv_dim, head_off, d0, head_dim, vec, kn);
        }
        float part[AB_KEYS * AB_HEADS];
#pragma unroll
        for (int k = 0; k < AB_KEYS; k++) {
#pragma unroll
            for (int hh = 0; hh < AB_HEADS; hh++) {
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; i++) s += qr[hh][i] * kk[k].at(i);
                part[k * AB_HEADS + hh] = s;
            }
        }
        const float sum = transpose_sum(part, lane);  // every lane: it shuffles
        const float score = (valid >> (lane / AB_HEADS)) & 1 ? sum : -INFINITY;
        // Per-head max over the chunk's keys (lanes ≡ head mod 4), then every head's in every lane.
        float m = score;
#pragma unroll
        for (int o = AB_HEADS; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(FULL_MASK, m, o));
        float corr[AB_HEADS], my_max = 0.0f, my_corr = 0.0f;
#pragma unroll
        for (int hh = 0; hh < AB_HEADS; hh++) {
            const float new_max = fmaxf(run_max[hh], __shfl_sync(FULL_MASK, m, hh));
            corr[hh] = expf(run_max[hh] - new_max);
            run_max[hh] = new_max;
            if (my_head == hh) my_max = new_max, my_corr = corr[hh];
        }
        const float p = expf(score - my_max);  // 0 for a masked key
        my_sum = my_sum * my_corr + p;
        __syncwarp();  // the previous chunk's s_p reads are done
        s_p[warp][lane] = p;
        __syncwarp();
#pragma unroll
        for (int hh = 0; hh < AB_HEADS; hh++) {
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[hh][i] *= corr[hh];
        }
#pragma unroll
        for (int k = 0; k < AB_KEYS; k++) {
            const float4 pk = *reinterpret_cast<const float4*>(&s_p[warp][k * AB_HEADS]);
            const float ph[AB_HEADS] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
            for (int hh = 0; hh < AB_HEADS; hh++) {
#pragma unroll
                for (int i = 0; i < DPL; i++) acc[hh][i] += ph[hh] * vv[k].at(i);
            }
        }
        if (PIPE) {
#pragma unroll
            for (int k = 0; k < AB_KEYS; k++) kk[k] = kn[k];
        }
    }
    // Σ p per head: the 8 lanes of each head, then every head's sum to every lane.
#pragma unroll
    for (int o = AB_HEADS; o < 32; o <<= 1) my_sum += __shfl_xor_sync(FULL_MASK, my_sum, o);
#pragma unroll
    for (int hh = 0; hh < AB_HEADS; hh++) {
        const float sum = __shfl_sync(FULL_MASK, my_sum, hh);
        if (lane == 0) {
            s_max[warp][hh] = run_max[hh];
            s_sum[warp][hh] = sum;
        }
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            if (d0 + i < head_dim) s_acc[warp][hh][d0 + i] = acc[hh][i];
        }
    }
    __syncthreads();
    finish_block<AB_HEADS, DPL>(s_max, s_sum, s_acc, dst, partial, done, grp, t, h0, nh, n_heads, head_dim, split,
                                n_splits, q8);
}

#define ATTENTION_BATCH_ENTRY(NAME, DPL, KV, MIN_BLOCKS) \
    SPLIT_ATTENTION_ENTRY(NAME, KV, MIN_BLOCKS, (attention_batch_body<DPL, KV>))
// attention_batch_<HD>, HD ≥ head_dim (64 or 128; 256 would hold 2 · 8 floats of q and acc per head and lane, and
// attention.cu serves it), and its f16-cache twin.
// ≤ 128 registers: 4 blocks per SM.
#define ATTENTION_BATCH_ENTRIES(NAME, DPL)        \
    ATTENTION_BATCH_ENTRY(NAME, DPL, float, 4) \
    ATTENTION_BATCH_ENTRY(NAME##_f16, DPL, u16, 4)
ATTENTION_BATCH_ENTRIES(attention_batch_64, 2)
ATTENTION_BATCH_ENTRIES(attention_batch_128, 4)
