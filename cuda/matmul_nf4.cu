// matmul_nf4  block decoder for NF4 (QLoRA's NormalFloat4, per-group absmax), joined after intn.cuh before a body
//             (matmul.cu, matmul_mma.cu, embed.cu)
// Layout      repacked on upload (src/backend/cuda/repack.rs) into 32-value runs: qs [runs][16] 4-bit codes in Q4_0's
//             order; dm [groups] u32 = the header, f16 absmax in the low half, group = run >> INTN_SHIFT.
//             w = absmax·NF4[q]
// Launch      none (device functions only); LEVELS: the tensor-core body fills the shared f16 levels first (intn.cuh)
// Numerics    block_dot = (absmax·d_x/32512)·Σ round(NF4[q_w]·32512)·q_x, the sum exact in int32 (dp4a on integer
//             levels within 1.4e-5 of NF4's, intn.cuh); tensor cores: the levels rounded to f16 (intn.cuh); w_get is
//             the reference's absmax·NF4[q]

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16
#define LEVELS 1

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    return f16_to_f32(intn_header(dm, blk) & 0xffff) * NF4_LEVELS[nibble_at(qs + blk * 16, 0, false, col & 31)];
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    return f16_to_f32(intn_header(dm, blk) & 0xffff) * (xds.x * (1.0f / NF4_INT_SCALE)) * (float)dot_levels(q, x0, x1);
}

// Tensor-core path (matmul_mma.cu): the group's header word per k step; B fragments from the f16 levels.
#define QH_BYTES 0
#define SC_BYTES 4
#define MMA_B_F16 1
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk >> INTN_SHIFT) * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float a = f16_to_f32(sc[0] & 0xffff);
    return make_float4(a, a, 0.0f, 0.0f);
}
