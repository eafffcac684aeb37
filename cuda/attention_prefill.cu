// attention_prefill  attention (formula in attention.cu) for many query tokens at once: the K/V rows of a
//                    key tile are staged once in shared memory and shared by every query row of the block
// Layout   q, dst: [n_tokens, n_heads · head_dim] f32; cache_k, cache_v: [n_slots, n_kv_heads · head_dim] f32
//          (attention_prefill_<HD>) or f16 (attention_prefill_<HD>_f16, widened exactly as they are staged);
//          with g = n_heads / n_kv_heads, row i of KV head kh (i < n_tokens · g) is query head kh · g + i % g
//          of token i / g: a block's 64 rows are ~64 / g consecutive batch tokens × their g heads (GQA reuse;
//          rows, not tokens, are tiled so that any g fills the block)
// Launch   grid (ceil(n_tokens · g / 64), n_kv_heads), 256 threads as 16 × 16 (ty, tx): a thread owns rows
//          ty + 16a (a < 4), keys tx + 16b of each 64-key tile (b < 4) and output dims tx + 16k (k < HD / 16).
//          Dynamic shared memory, floats: q [64][HD + 4] + K or V [64][HD + 4] + p [64][65] (the +4 pads let
//          a half-warp's float4 reads of 16 key rows hit distinct banks) = 51,456 / 84,224 / 149,760 bytes for
//          HD 64 / 128 / 256; the host raises the function's limit, or runs attention.cu where the device has less.
//          Rows may belong to different sequences (continuous batching): the block makes one pass per distinct
//          sequence among its rows, in ascending seq id; a pass reads keys 0 ..= the largest pos of that
//          sequence's rows through its block-table row (keys outside the table or the cache are skipped, never
//          read), and row r takes key j only if it is in the pass's sequence and j0(r) ≤ j ≤ pos[r], j0(r) =
//          first_key(pos[r], window); a pass starts at the tile holding its rows' smallest j0 and never looks up
//          a key below that j0. A prefill tile is
//          one pass; a tile of k sequences reads each one's keys once, k passes.
// Numerics f32 throughout: q pre-multiplied by scale; q · k a sequential fma chain over d; per row an online
//          softmax over 64-key tiles (running max from a finite -1e30 so all-masked tiles rescale by exactly 1,
//          expf, the tile's Σp as a 16-lane butterfly), Σ p · v an fma chain in key order, one division at the
//          end. A masked key has p = 0 exactly; its V row is zero or a finite cached row (slots of the pass's
//          own sequence below its largest pos), so 0 · v adds nothing. Rows whose seq ≥ n_seqs are zeros.

#define PF_ROWS 64      // query rows per block
#define PF_KEYS 64      // keys per tile
#define PF_THREADS 256  // 16 × 16
#define PF_NONE 0xffffffffu
#define PF_NEG (-1e30f)
#define PF_STRIDE(HD) ((HD) + 4)  // floats per staged q or K/V row: 16-byte rows, float4 reads hit all banks

template <typename KV>  // the cache's element type
struct PrefillArgs {
    const float* q;
    const KV *cache_k, *cache_v;
    const u32 *seq, *pos, *block_table;
    float* dst;
    u32 n_tokens, n_heads, n_kv_heads, head_dim;
    float scale;
    u32 block_size, max_blocks, n_seqs, n_slots, window;
};

// Offset of row i's head vector in q or dst (row i as in the header, of KV head kv_head).
template <typename KV>
__device__ __forceinline__ u64 row_offset(const PrefillArgs<KV>& a, u64 i, u32 kv_head) {
    const u32 g = a.n_heads / a.n_kv_heads;
    return ((i / g) * a.n_heads + (u64)kv_head * g + i % g) * a.head_dim;
}

// s_seq / s_pos per row (PF_NONE for rows past the batch or with a sequence outside the table), and the
// rows' q scaled into s_q (zero past head_dim and past the batch).
template <int HD, typename KV>
__device__ void load_rows(const PrefillArgs<KV>& a, u64 row0, u32 kv_head, float* s_q, u32* s_seq, u32* s_pos) {
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u64 n_rows = (u64)a.n_tokens * (a.n_heads / a.n_kv_heads);
    if (tid < PF_ROWS) {
        const u64 i = row0 + tid;
        u32 sq = PF_NONE, p = 0;
        if (i < n_rows) {
            const u64 t = i / (a.n_heads / a.n_kv_heads);
            sq = a.seq[t] < a.n_seqs ? a.seq[t] : PF_NONE;
            p = a.pos[t];
        }
        s_seq[tid] = sq;
        s_pos[tid] = p;
    }
    for (u32 r = warp; r < PF_ROWS; r += PF_THREADS / 32) {
        const u64 i = row0 + r;
        const float* qr = i < n_rows ? a.q + row_offset(a, i, kv_head) : nullptr;
        for (u32 d = lane; d < HD; d += 32) s_q[r * PF_STRIDE(HD) + d] = qr && d < a.head_dim ? qr[d] * a.scale : 0.0f;
    }
}

// s_slot[c] = the cache slot of key k0 + c of sequence `cur`, or PF_NONE when it is below `begin`, at or past `end`
// (end ≤ max_blocks · block_size, so the table index stays in the row) or its block lies outside the cache.
template <typename KV>
__device__ __forceinline__ void stage_slots(const PrefillArgs<KV>& a, u32 cur, u64 k0, u64 begin, u64 end, u32* s_slot) {
    const u32 tid = threadIdx.x;
    if (tid >= PF_KEYS) return;
    const u64 j = k0 + tid;
    u32 slot = PF_NONE;
    if (j >= begin && j < end) {
        const u64 s = (u64)a.block_table[(u64)cur * a.max_blocks + j / a.block_size] * a.block_size + j % a.block_size;
        if (s < a.n_slots) slot = (u32)s;
    }
    s_slot[tid] = slot;
}

// s_kv[c][d] = cache[s_slot[c], kv_head · head_dim + d]; zero for a skipped key or d ≥ head_dim.
template <int HD, typename KV>
__device__ void stage_kv(const PrefillArgs<KV>& a, const KV* cache, u32 kv_head, const u32* s_slot, float* s_kv) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u64 kv_dim = (u64)a.n_kv_heads * a.head_dim;
    for (u32 c = warp; c < PF_KEYS; c += PF_THREADS / 32) {
        const u32 slot = s_slot[c];
        const KV* src = slot != PF_NONE ? cache + slot * kv_dim + (u64)kv_head * a.head_dim : nullptr;
        for (u32 d = lane; d < HD; d += 32) s_kv[c * PF_STRIDE(HD) + d] = src && d < a.head_dim ? kv_load(src, d) : 0.0f;
    }
}

// Max and sum over the 16 lanes of a half-warp (the 16 tx of one ty); xor butterflies, so every lane gets
// the same bits.
__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Per-thread state of its 4 rows: running max, running Σp, unnormalized output, and the pass's mask.
template <int HD>
struct RowState {
    float m[4], l[4], acc[4][HD / 16];
    bool live[4];  // the row belongs to the current pass's sequence
    u32 last[4];   // the row's pos: its last key
    u32 first[4];  // its first key (the sliding window's start; 0 without one)
};

// Scores of the thread's 4 rows × 4 keys of the staged K tile, masked, folded into the online softmax;
// the probabilities go to s_p for the P · V step.
template <int HD, typename KV>
__device__ void score_tile(const PrefillArgs<KV>& a, RowState<HD>& st, u64 k0, const float* s_q, const float* s_kv,
                           const u32* s_slot, float* s_p) {
    const u32 tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    float s[4][4] = {};
    // Four dims per step: staged rows are zero from head_dim up to HD, so the rounded-up tail adds 0.
    for (u32 d = 0; d < a.head_dim; d += 4) {
        float4 qa[4], kb[4];
#pragma unroll
        for (int i = 0; i < 4; i++) qa[i] = *(const float4*)&s_q[(ty + 16 * i) * PF_STRIDE(HD) + d];
#pragma unroll
        for (int b = 0; b < 4; b++) kb[b] = *(const float4*)&s_kv[(tx + 16 * b) * PF_STRIDE(HD) + d];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int b = 0; b < 4; b++) {
                s[i][b] = fmaf(qa[i].x, kb[b].x, s[i][b]);
                s[i][b] = fmaf(qa[i].y, kb[b].y, s[i][b]);
                s[i][b] = fmaf(qa[i].z, kb[b].z, s[i][b]);
                s[i][b] = fmaf(qa[i].w, kb[b].w, s[i][b]);
            }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float mx = -INFINITY;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const u32 c = tx + 16 * b;
            const bool keep = st.live[i] && s_slot[c] != PF_NONE && k0 + c <= st.last[i] && k0 + c >= st.first[i];
            s[i][b] = keep ? s[i][b] : -INFINITY;
            mx = fmaxf(mx, s[i][b]);
        }
        const float m_new = fmaxf(st.m[i], half_warp_max(mx));  // finite: m starts at PF_NEG
        const float corr = expf(st.m[i] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const float p = expf(s[i][b] - m_new);  // expf(-inf) = 0 for masked keys
            s_p[(ty + 16 * i) * (PF_KEYS + 1) + tx + 16 * b] = p;
            sum += p;
        }
        st.l[i] = st.l[i] * corr + half_warp_sum(sum);
        st.m[i] = m_new;
#pragma unroll
        for (int k = 0; k < HD / 16; k++) st.acc[i][k] *= corr;
    }
}

// acc[row][d] += Σ_c p[row][c] · v[c][d] over the first n_keys keys of the staged V tile.
template <int HD>
__device__ void accumulate_pv(RowState<HD>& st, u32 n_keys, const float* s_p, const float* s_kv) {
    const u32 tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    for (u32 c = 0; c < n_keys; c++) {
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) p[i] = s_p[(ty + 16 * i) * (PF_KEYS + 1) + c];
#pragma unroll
        for (int k = 0; k < HD / 16; k++) {
            const float v = s_kv[c * PF_STRIDE(HD) + tx + 16 * k];
#pragma unroll
            for (int i = 0; i < 4; i++) st.acc[i][k] = fmaf(p[i], v, st.acc[i][k]);
        }
    }
}

// The next pass's sequence: the smallest seq id among rows not yet done (PF_NONE when all are), and
// through s_max_pos the largest pos among its rows, through s_min_first the smallest first key. Every thread
// must call it (it holds barriers).
__device__ u32 next_sequence(const u32* s_seq, const u32* s_pos, u32 window, u32* s_cur, u32* s_max_pos,
                             u32* s_min_first) {
    const u32 tid = threadIdx.x;
    if (tid == 0) {
        *s_cur = PF_NONE;
        *s_max_pos = 0;
        *s_min_first = PF_NONE;
    }
    __syncthreads();
    if (tid < PF_ROWS && s_seq[tid] != PF_NONE) atomicMin(s_cur, s_seq[tid]);
    __syncthreads();
    const u32 cur = *s_cur;
    if (cur != PF_NONE && tid < PF_ROWS && s_seq[tid] == cur) {
        atomicMax(s_max_pos, s_pos[tid]);
        atomicMin(s_min_first, first_key(s_pos[tid], window));
    }
    __syncthreads();
    return cur;
}

template <int HD, typename KV>
__device__ void attention_prefill_body(const PrefillArgs<KV>& a) {
    extern __shared__ float4 smem[];  // float4: 16-byte aligned
    float* s_q = (float*)smem;                    // [PF_ROWS][PF_STRIDE], scaled q
    float* s_kv = s_q + PF_ROWS * PF_STRIDE(HD);  // [PF_KEYS][PF_STRIDE], the tile's K, then its V
    float* s_p = s_kv + PF_KEYS * PF_STRIDE(HD);  // [PF_ROWS][PF_KEYS + 1], the tile's probabilities
    __shared__ u32 s_seq[PF_ROWS], s_pos[PF_ROWS], s_slot[PF_KEYS], s_cur, s_max_pos, s_min_first;
    const u32 tid = threadIdx.x, tx = tid & 15, ty = tid >> 4, kv_head = blockIdx.y;
    const u64 row0 = (u64)blockIdx.x * PF_ROWS, key_cap = (u64)a.max_blocks * a.block_size;

    load_rows<HD, KV>(a, row0, kv_head, s_q, s_seq, s_pos);
    RowState<HD> st;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        st.m[i] = PF_NEG;
        st.l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < HD / 16; k++) st.acc[i][k] = 0.0f;
    }
    // next_sequence's first barrier also publishes load_rows' writes.
    for (u32 cur; (cur = next_sequence(s_seq, s_pos, a.window, &s_cur, &s_max_pos, &s_min_first)) != PF_NONE;) {
        const u64 end = min((u64)s_max_pos + 1, key_cap);  // keys begin .. end-1 of sequence cur
        const u64 begin = s_min_first;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            st.live[i] = s_seq[ty + 16 * i] == cur;
            st.last[i] = s_pos[ty + 16 * i];
            st.first[i] = first_key(st.last[i], a.window);
        }
        for (u64 k0 = begin / PF_KEYS * PF_KEYS; k0 < end; k0 += PF_KEYS) {
            stage_slots(a, cur, k0, begin, end, s_slot);
            __syncthreads();
            stage_kv<HD, KV>(a, a.cache_k, kv_head, s_slot, s_kv);
            __syncthreads();
            score_tile<HD, KV>(a, st, k0, s_q, s_kv, s_slot, s_p);
            __syncthreads();  // K is read; V may replace it
            stage_kv<HD, KV>(a, a.cache_v, kv_head, s_slot, s_kv);
            __syncthreads();
            accumulate_pv<HD>(st, (u32)min((u64)PF_KEYS, end - k0), s_p, s_kv);
            __syncthreads();  // before the next tile's s_slot, s_kv and s_p
        }
        __syncthreads();  // every thread has read s_seq, s_cur and s_max_pos of this pass
        if (tid < PF_ROWS && s_seq[tid] == cur) s_seq[tid] = PF_NONE;
    }
    const u64 n_rows = (u64)a.n_tokens * (a.n_heads / a.n_kv_heads);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const u64 row = row0 + ty + 16 * i;
        if (row >= n_rows) continue;
        float* out = a.dst + row_offset(a, row, kv_head);
#pragma unroll
        for (int k = 0; k < HD / 16; k++) {
            const u32 d = tx + 16 * k;
            if (d < a.head_dim) out[d] = st.l[i] > 0.0f ? st.acc[i][k] / st.l[i] : 0.0f;
        }
    }
}

// One entry per head_dim bound HD (64, 128, 256) and cache type: the host picks the smallest HD ≥ head_dim.
#define ATTENTION_PREFILL(NAME, HD, KV)                                                                       \
    extern "C" __global__ void __launch_bounds__(PF_THREADS)                                                  \
        NAME(const float* q, const KV* cache_k, const KV* cache_v, const u32* seq, const u32* pos,            \
             const u32* block_table, float* dst, u32 n_tokens, u32 n_heads, u32 n_kv_heads, u32 head_dim,     \
             float scale, u32 block_size, u32 max_blocks, u32 n_seqs, u32 n_slots, u32 window) {              \
        GRID_DEPENDENCY_WAIT();                                                                               \
        const PrefillArgs<KV> a = {q,          cache_k,    cache_v, seq,        pos,      block_table,        \
                                   dst,        n_tokens,   n_heads, n_kv_heads, head_dim, scale,              \
                                   block_size, max_blocks, n_seqs,  n_slots,    window};                      \
        attention_prefill_body<HD, KV>(a);                                                                    \
    }

ATTENTION_PREFILL(attention_prefill_64, 64, float)
ATTENTION_PREFILL(attention_prefill_128, 128, float)
ATTENTION_PREFILL(attention_prefill_256, 256, float)
ATTENTION_PREFILL(attention_prefill_64_f16, 64, u16)
ATTENTION_PREFILL(attention_prefill_128_f16, 128, u16)
ATTENTION_PREFILL(attention_prefill_256_f16, 256, u16)
