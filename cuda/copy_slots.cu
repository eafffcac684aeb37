// copy_slots  cache[dst + i, :] = cache[src + i, :] for i < n, for K and V   (copy-on-write of a shared page)
// Layout      cache_k, cache_v: [n_slots, kv_dim] f32 (copy_slots) or f16 (copy_slots_f16); src, dst, n in elements;
//             the host checks both ranges fit, and splits overlapping ones
// Launch      one thread per copied element (n · kv_dim), 256-thread blocks
// Numerics    a copy

#define COPY_SLOTS_ENTRY(NAME, KV)                                                        \
    extern "C" __global__ void NAME(KV* cache_k, KV* cache_v, u64 src, u64 dst, u64 n) { \
        GRID_DEPENDENCY_WAIT();                                                           \
        const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;                         \
        if (i < n) {                                                                      \
            cache_k[dst + i] = cache_k[src + i];                                          \
            cache_v[dst + i] = cache_v[src + i];                                          \
        }                                                                                 \
    }
COPY_SLOTS_ENTRY(copy_slots, float)
COPY_SLOTS_ENTRY(copy_slots_f16, u16)
