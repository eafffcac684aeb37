// matmul_q4_0  block decoder for Q4_0, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout       repacked: qs [blocks][16] nibbles (GGUF order), dm [blocks] f16 d; w = (q - 8) · d
// Launch       none (device functions only)
// Numerics     block_dot = d_w · (d_x · Σ q_w q_x - 8 · s_x), s_x = d_x · Σ q_x (exact int32 sums)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float d = f16_to_f32(((const u16*)dm)[blk]);
    return (float)(nibble_at(qs + blk * 16, 0, false, col & 31) - 8) * d;
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const float d = f16_to_f32(((const u16*)dm)[blk]);
    const int s = dot_nibbles(q, 0, false, x0, x1);
    return d * (xds.x * (float)s - 8.0f * xds.y);
}

// Tensor-core path (matmul_mma.cu): B fragment of mma m16n8k32 from the raw 16 quant bytes of a
// block in shared memory: b0 = values 4t..4t+3, b1 = values 16+4t..16+4t+3, as int8 (q - 8).
#define QH_BYTES 0
#define SC_BYTES 4
// The aligned dm word holding the f16 d of blocks blk & ~1 and blk | 1 (dm is padded on upload).
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk & ~1ull) * 2; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float d = f16_to_f32((blk & 1) ? (sc[0] >> 16) : (sc[0] & 0xffff));
    return make_float4(d, d, 0.0f, 0.0f);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const u32 w = *(const u32*)(q + 4 * t);
    b0 = ((w & 0x0F0F0F0Fu) + 0x78787878u) ^ 0x80808080u;  // per byte: (q + 120) ^ 128 = q - 8
    b1 = (((w >> 4) & 0x0F0F0F0Fu) + 0x78787878u) ^ 0x80808080u;
}
