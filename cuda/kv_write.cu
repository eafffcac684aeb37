// kv_write  cache_k[slot[t], :] = k[t, :], cache_v[slot[t], :] = v[t, :]
// Layout    k, v: [n_tokens, kv_dim] f32; slot: u32 [n_tokens]; cache_k, cache_v: [n_slots, kv_dim]
// Launch    one thread per element of k, 256-thread blocks
// Numerics  a copy; an out-of-range slot is skipped

extern "C" __global__ void kv_write(const float* k, const float* v, const u32* slot, float* cache_k, float* cache_v,
                                    u64 n, u32 kv_dim, u32 n_slots) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const u32 s = slot[i / kv_dim];
        if (s < n_slots) {
            const u64 j = (u64)s * kv_dim + i % kv_dim;
            cache_k[j] = k[i];
            cache_v[j] = v[i];
        }
    }
}
