// matmul_nf4_dq  block decoder for NF4_DQ (NF4 with double-quantized scales: 8-bit c_j per group under one f16 D per
//                block of two groups), joined after intn.cuh before a body (matmul.cu, matmul_mma.cu, embed.cu)
// Layout         repacked on upload (src/backend/cuda/repack.rs) into 32-value runs: qs [runs][16] 4-bit codes in
//                Q4_0's order; dm [blocks] u32 = the header, f16 D | c0 << 16 | c1 << 24, block = run >> INTN_SHIFT,
//                group j = (run >> (INTN_SHIFT - 1)) & 1. w = (D·c_j)·NF4[q]
// Launch         none (device functions only); LEVELS: the tensor-core body fills the shared f16 levels first
// Numerics       as matmul_nf4.cu with the scale D·c_j (exact in f32: 11 by 8 bits)

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16
#define LEVELS 1

// D·c_j of the group holding 32-value run blk, from its block's header h.
__device__ __forceinline__ float dq_scale(u32 h, u64 blk) {
    return f16_to_f32(h & 0xffff) * (float)((h >> (16 + 8 * ((blk >> (INTN_SHIFT - 1)) & 1))) & 0xff);
}

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    return dq_scale(intn_header(dm, blk), blk) * NF4_LEVELS[nibble_at(qs + blk * 16, 0, false, col & 31)];
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    return dq_scale(intn_header(dm, blk), blk) * (xds.x * (1.0f / NF4_INT_SCALE)) * (float)dot_levels(q, x0, x1);
}

// Tensor-core path (matmul_mma.cu): the block's header word per k step; B fragments from the f16 levels.
#define QH_BYTES 0
#define SC_BYTES 4
#define MMA_B_F16 1
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk >> INTN_SHIFT) * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float s = dq_scale(sc[0], blk);
    return make_float4(s, s, 0.0f, 0.0f);
}
