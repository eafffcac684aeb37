// copy_slots  cache[dst + i, :] = cache[src + i, :] for i < n, for K and V   (copy-on-write of a shared page)
// Layout      cache_k, cache_v: [n_slots, kv_dim] f32; the host checks both ranges fit, and splits overlapping ones
// Launch      one thread per copied element (n · kv_dim), 256-thread blocks
// Numerics    a copy

extern "C" __global__ void copy_slots(float* cache_k, float* cache_v, u64 src, u64 dst, u64 n) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        cache_k[dst + i] = cache_k[src + i];
        cache_v[dst + i] = cache_v[src + i];
    }
}
