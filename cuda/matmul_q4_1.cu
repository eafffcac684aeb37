// matmul_q4_1  block decoder for Q4_1, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout       repacked: qs [blocks][16] nibbles (GGUF order), dm [blocks] u32 = f16 d | f16 m << 16; w = q·d + m
// Launch       none (device functions only)
// Numerics     block_dot = d_w · d_x · Σ q_w q_x + m_w · s_x, s_x = d_x · Σ q_x (exact int32 sums)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const u32 p = ((const u32*)dm)[blk];
    return (float)nibble_at(qs + blk * 16, 0, false, col & 31) * f16_to_f32(p & 0xffff) + f16_to_f32(p >> 16);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const u32 p = ((const u32*)dm)[blk];
    const int s = dot_nibbles(q, 0, false, x0, x1);
    return f16_to_f32(p & 0xffff) * xds.x * (float)s + f16_to_f32(p >> 16) * xds.y;
}

// Tensor-core path (matmul_mma.cu): B fragment of mma m16n8k32 from the raw 16 quant bytes of a
// block in shared memory: b0 = values 4t..4t+3, b1 = values 16+4t..16+4t+3, as int8 q (0..15).
#define QH_BYTES 0
#define SC_BYTES 4
// The block's dm word: f16 d | f16 m << 16.
__device__ __forceinline__ u64 sc_offset(u64 blk) { return blk * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float d = f16_to_f32(sc[0] & 0xffff), m = f16_to_f32(sc[0] >> 16);
    return make_float4(d, d, m, m);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const u32 w = *(const u32*)(q + 4 * t);
    b0 = w & 0x0F0F0F0Fu;
    b1 = (w >> 4) & 0x0F0F0F0Fu;
}
