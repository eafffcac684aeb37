// matmul_q5_0  block decoder for Q5_0, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout       repacked: qs [blocks][16] nibbles, qh [blocks] u32 fifth bits (bit j → value j), dm [blocks] f16 d
// Launch       none (device functions only); w = (q - 16) · d
// Numerics     block_dot = d_w · (d_x · Σ q_w q_x - 16 · s_x), s_x = d_x · Σ q_x (exact int32 sums)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float d = f16_to_f32(((const u16*)dm)[blk]);
    return (float)(nibble_at(qs + blk * 16, ((const u32*)qh)[blk], true, col & 31) - 16) * d;
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const float d = f16_to_f32(((const u16*)dm)[blk]);
    const int s = dot_nibbles(q, ((const u32*)qh)[blk], true, x0, x1);
    return d * (xds.x * (float)s - 16.0f * xds.y);
}
