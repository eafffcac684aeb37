// matmul_q5_k  block decoder for Q5_K, joined between common.cuh and a body (matmul.cu, matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value blocks: qs [blocks][16] low nibbles
//              in Q4_0's order, qh [blocks] u32 fifth bits (bit i → value i), as Q5_1 (GGUF spreads a block's
//              fifth bits over 32 bytes shared by 8 blocks); dm [super-blocks][16] = GGUF's f16 d, f16 dmin,
//              12 bytes of 6-bit scales and mins (read as Q4_K's). Block j: w = (d·sc_j)·q - dmin·m_j, q in 0..31
// Launch       none (device functions only)
// Numerics     block_dot = d·sc_j · d_x·Σ q_w q_x - dmin·m_j · s_x, s_x = d_x·Σ q_x (exact int32 sums), as Q5_1 with
//              the block's scale and min; w_get is the reference's arithmetic, each step rounded (no contraction)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float2 s = k4_scales(*(const uint4*)(dm + blk / 8 * 16), blk);
    const int q = nibble_at(qs + blk * 16, ((const u32*)qh)[blk], true, col & 31);
    return __fsub_rn(__fmul_rn(s.x, (float)q), s.y);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const float2 s = k4_scales(*(const uint4*)(dm + blk / 8 * 16), blk);
    return s.x * xds.x * (float)dot_nibbles(q, ((const u32*)qh)[blk], true, x0, x1) - s.y * xds.y;
}

// Tensor-core path (matmul_mma.cu): the super-block's 16-byte record per k step; B fragments as Q5_1's.
#define QH_BYTES 4
#define SC_BYTES 16
__device__ __forceinline__ u64 sc_offset(u64 blk) { return blk / 8 * 16; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 s = k4_scales(make_uint4(sc[0], sc[1], sc[2], sc[3]), blk);
    return make_float4(s.x, s.x, -s.y, -s.y);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const u32 w = *(const u32*)(q + 4 * t);
    b0 = (w & 0x0F0F0F0Fu) | spread_high_bits(qh[0], 4 * t);
    b1 = ((w >> 4) & 0x0F0F0F0Fu) | spread_high_bits(qh[0], 16 + 4 * t);
}
