// matmul_int4  block decoder for INT4 (group-wise asymmetric), joined after intn.cuh before a body (matmul.cu,
//              matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value runs: qs [runs][16] nibbles in Q4_0's order
//              (the file packs neighbours into a byte: a lane's dp4a would need a shuffle); dm [groups] u32 = the header,
//              f16 d | z << 16, group = run >> INTN_SHIFT. w = d·(q - z), q in 0..15
// Launch       none (device functions only)
// Numerics     block_dot = d·d_x·Σ q_w q_x - d·z·s_x, s_x = d_x·Σ q_x (exact int32 sums, d·z exact in f32), as Q4_1;
//              w_get is the reference's d·(q - z), one exact product

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float2 dz = intn_dz(intn_header(dm, blk));
    return dz.x * (float)(nibble_at(qs + blk * 16, 0, false, col & 31) - (int)dz.y);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const float2 dz = intn_dz(intn_header(dm, blk));
    const int s = dot_nibbles(q, 0, false, x0, x1);
    return dz.x * xds.x * (float)s - dz.x * dz.y * xds.y;
}

// Tensor-core path (matmul_mma.cu): the group's header word per k step; B fragments as Q4_1's.
#define QH_BYTES 0
#define SC_BYTES 4
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk >> INTN_SHIFT) * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 dz = intn_dz(sc[0]);
    return make_float4(dz.x, dz.x, -dz.x * dz.y, -dz.x * dz.y);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const u32 w = *(const u32*)(q + 4 * t);
    b0 = w & 0x0F0F0F0Fu;
    b1 = (w >> 4) & 0x0F0F0F0Fu;
}
