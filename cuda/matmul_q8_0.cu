// matmul_q8_0  block decoder for Q8_0, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout       repacked: qs [blocks][32] int8, dm [blocks] f16 d; w = q · d
// Launch       none (device functions only)
// Numerics     block_dot = d_w · d_x · Σ q_w q_x (exact int32 sum, 8 dp4a)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 32

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    return (float)(signed char)qs[blk * 32 + (col & 31)] * f16_to_f32(((const u16*)dm)[blk]);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const int4 a = *(const int4*)(qs + blk * 32), b = *(const int4*)(qs + blk * 32 + 16);
    int s = dp4a(a.x, x0.x, 0);
    s = dp4a(a.y, x0.y, s);
    s = dp4a(a.z, x0.z, s);
    s = dp4a(a.w, x0.w, s);
    s = dp4a(b.x, x1.x, s);
    s = dp4a(b.y, x1.y, s);
    s = dp4a(b.z, x1.z, s);
    s = dp4a(b.w, x1.w, s);
    return f16_to_f32(((const u16*)dm)[blk]) * xds.x * (float)s;
}

// Tensor-core path (matmul_mma.cu): B fragment of mma m16n8k32 from the raw 32 quant bytes of a
// block in shared memory: b0 = values 4t..4t+3, b1 = values 16+4t..16+4t+3.
#define QH_BYTES 0
#define SC_BYTES 4
// The aligned dm word holding the f16 d of blocks blk & ~1 and blk | 1 (dm is padded on upload).
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk & ~1ull) * 2; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float d = f16_to_f32((blk & 1) ? (sc[0] >> 16) : (sc[0] & 0xffff));
    return make_float4(d, d, 0.0f, 0.0f);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    b0 = *(const u32*)(q + 4 * t);
    b1 = *(const u32*)(q + 16 + 4 * t);
}
