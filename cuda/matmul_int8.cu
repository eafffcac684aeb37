// matmul_int8  block decoder for INT8 (group-wise asymmetric), joined after intn.cuh before a body (matmul.cu,
//              matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs): qs [runs][32] int8 = q - 128 (the file's unsigned bytes
//              with the top bit flipped, so dp4a and the tensor-core fragments take them signed); dm [groups] u32 =
//              the header, f16 d | z << 16, group = run >> INTN_SHIFT. w = d·(q - z) = d·((q - 128) - (z - 128))
// Launch       none (device functions only)
// Numerics     block_dot = d·d_x·Σ (q_w - 128) q_x - d·(z - 128)·s_x (exact int32 sums, d·(z - 128) exact in f32);
//              w_get is the reference's d·(q - z), one exact product

#define FORMAT_QUANTIZED 1
#define QS_BYTES 32

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float2 dz = intn_dz(intn_header(dm, blk));
    return dz.x * (float)((int)(signed char)qs[blk * 32 + (col & 31)] + 128 - (int)dz.y);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const int4 a = *(const int4*)(qs + blk * 32), b = *(const int4*)(qs + blk * 32 + 16);
    const float2 dz = intn_dz(intn_header(dm, blk));
    int s = dp4a(a.x, x0.x, 0);
    s = dp4a(a.y, x0.y, s);
    s = dp4a(a.z, x0.z, s);
    s = dp4a(a.w, x0.w, s);
    s = dp4a(b.x, x1.x, s);
    s = dp4a(b.y, x1.y, s);
    s = dp4a(b.z, x1.z, s);
    s = dp4a(b.w, x1.w, s);
    return dz.x * xds.x * (float)s - dz.x * (dz.y - 128.0f) * xds.y;
}

// Tensor-core path (matmul_mma.cu): the group's header word per k step; B fragments as Q8_0's.
#define QH_BYTES 0
#define SC_BYTES 4
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk >> INTN_SHIFT) * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 dz = intn_dz(sc[0]);
    const float m = -dz.x * (dz.y - 128.0f);
    return make_float4(dz.x, dz.x, m, m);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    b0 = *(const u32*)(q + 4 * t);
    b1 = *(const u32*)(q + 16 + 4 * t);
}
