// rope_kv_write  rope.cu's rotation of every head of q and of k in place, then cache_k[slot[t], :] = k[t, :] and
//                cache_v[slot[t], :] = v[t, :] (kv_write.cu's copy): the attention block's step between the
//                projections and attention in one launch instead of three, the same bits
// Layout         q: [n_tokens, n_heads · head_dim], k, v: [n_tokens, n_kv_heads · head_dim] f32; pos, slot: u32
//                [n_tokens]; cache_k, cache_v: [n_slots, n_kv_heads · head_dim] f32 (rope_kv_write) or f16
//                (rope_kv_write_f16)
// Launch         one block per (token, head of q or of k): grid.x = n_tokens · (n_heads + n_kv_heads); threads
//                stride over the pairs, then (k's blocks) over the head's values
// Numerics       rope.cu's (θ in f32, sincosf at full precision); the cache as kv_write.cu's (f16: rounded to
//                nearest even); an out-of-range slot is skipped

struct RopeArgs {
    u32 n_heads, n_kv_heads, head_dim, n_rot;
    float theta, freq_scale;
    u32 neox;
};

template <typename KV>
__device__ __forceinline__ void rope_kv_write_body(float* q, float* k, const float* v, const u32* pos, const u32* slot,
                                                   const float* ff, KV* cache_k, KV* cache_v, u32 n_slots,
                                                   RopeArgs a) {
    const u32 heads = a.n_heads + a.n_kv_heads;
    const u32 t = blockIdx.x / heads, head = blockIdx.x % heads;
    if (head < a.n_heads) {  // a head of q: rotated only (block-uniform)
        rope_head(q + ((u64)t * a.n_heads + head) * a.head_dim, pos[t], a.head_dim, a.n_rot, a.theta, a.freq_scale,
                  a.neox, 1.0f, 0, ff);
        return;
    }
    const u32 kv_dim = a.n_kv_heads * a.head_dim;
    const u64 at = (u64)t * kv_dim + (u64)(head - a.n_heads) * a.head_dim;  // the head's first value in k and v
    rope_head(k + at, pos[t], a.head_dim, a.n_rot, a.theta, a.freq_scale, a.neox, 1.0f, 0, ff);
    __syncthreads();  // each thread copies values another thread rotated
    const u32 s = slot[t];
    if (s >= n_slots) return;
    const u64 dst = (u64)s * kv_dim + (at - (u64)t * kv_dim);
    for (u32 i = threadIdx.x; i < a.head_dim; i += blockDim.x) {
        kv_store(cache_k, dst + i, k[at + i]);
        kv_store(cache_v, dst + i, v[at + i]);
    }
}

#define ROPE_KV_WRITE_ENTRY(NAME, KV)                                                                            \
    extern "C" __global__ void NAME(float* q, float* k, const float* v, const u32* pos, const u32* slot,         \
                                    const float* ff, KV* cache_k, KV* cache_v, u32 n_slots, RopeArgs a) {        \
        GRID_DEPENDENCY_WAIT();                                                                                  \
        rope_kv_write_body<KV>(q, k, v, pos, slot, ff, cache_k, cache_v, n_slots, a);                            \
    }
ROPE_KV_WRITE_ENTRY(rope_kv_write, float)
ROPE_KV_WRITE_ENTRY(rope_kv_write_f16, u16)
