// embed     dst[t, c] = scale · table[ids[t], c]; body joined after one format decoder (matmul_<format>.cu)
// Layout    table: [vocab, d] in its repacked format; ids: u32 [n_tokens]; dst: [n_tokens, d] f32
// Launch    one thread per element of dst, 256-thread blocks
// Numerics  the decoder's exact dequantization times scale (one f32 multiply); an out-of-range id gives zeros

extern "C" __global__ void embed(const u8* qs, const u8* qh, const u8* dm, const u32* ids, float* dst, u64 n, u32 d,
                                 u32 vocab, float scale) {
    GRID_DEPENDENCY_WAIT();
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const u32 id = ids[i / d];
        dst[i] = id < vocab ? w_get(qs, qh, dm, id, (u32)(i % d), d) * scale : 0.0f;
    }
}
