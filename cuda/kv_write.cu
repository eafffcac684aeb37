// kv_write  cache_k[slot[t], :] = k[t, :], cache_v[slot[t], :] = v[t, :]
// Layout    k, v: [n_tokens, kv_dim] f32; slot: u32 [n_tokens]; cache_k, cache_v: [n_slots, kv_dim] f32 (kv_write)
//           or f16 (kv_write_f16)
// Launch    one thread per element of k, 256-thread blocks
// Numerics  a copy (f16: rounded to nearest even); an out-of-range slot is skipped

template <typename KV>
__device__ __forceinline__ void kv_write_body(const float* k, const float* v, const u32* slot, KV* cache_k,
                                              KV* cache_v, u64 n, u32 kv_dim, u32 n_slots) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const u32 s = slot[i / kv_dim];
        if (s < n_slots) {
            const u64 j = (u64)s * kv_dim + i % kv_dim;
            kv_store(cache_k, j, k[i]);
            kv_store(cache_v, j, v[i]);
        }
    }
}

#define KV_WRITE_ENTRY(NAME, KV)                                                                               \
    extern "C" __global__ void NAME(const float* k, const float* v, const u32* slot, KV* cache_k, KV* cache_v, \
                                    u64 n, u32 kv_dim, u32 n_slots) {                                          \
        GRID_DEPENDENCY_WAIT();                                                                                \
        kv_write_body<KV>(k, v, slot, cache_k, cache_v, n, kv_dim, n_slots);                                   \
    }
KV_WRITE_ENTRY(kv_write, float)
KV_WRITE_ENTRY(kv_write_f16, u16)
