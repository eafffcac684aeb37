// matmul_int2  block decoder for INT2 (group-wise asymmetric), joined after intn.cuh before a body (matmul.cu,
//              matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value runs: qs [runs][8] 2-bit levels in the
//              k-quants' order (word h, byte i, bits 2p = value 16h+4p+i); dm [groups] u32 = the header, f16 d | z << 16,
//              group = run >> INTN_SHIFT. w = d·(q - z), q in 0..3
// Launch       none (device functions only)
// Numerics     block_dot = d·d_x·Σ q_w q_x - d·z·s_x (exact int32 sums, d·z exact in f32); w_get is the reference's
//              d·(q - z), one exact product

#define FORMAT_QUANTIZED 1
#define QS_BYTES 8

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const float2 dz = intn_dz(intn_header(dm, blk));
    return dz.x * (float)((int)two_bit_at(*(const uint2*)(qs + blk * 8), col & 31) - (int)dz.y);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint2 q = *(const uint2*)(qs + blk * 8);
    const float2 dz = intn_dz(intn_header(dm, blk));
    const int a[4] = {x0.x, x0.y, x0.z, x0.w}, b[4] = {x1.x, x1.y, x1.z, x1.w};
    int s = 0;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        s = dp4a((int)two_bit_lanes(q.x, p), a[p], s);
        s = dp4a((int)two_bit_lanes(q.y, p), b[p], s);
    }
    return dz.x * xds.x * (float)s - dz.x * dz.y * xds.y;
}

// Tensor-core path (matmul_mma.cu): the group's header word per k step; B fragments as Q2_K's.
#define QH_BYTES 0
#define SC_BYTES 4
__device__ __forceinline__ u64 sc_offset(u64 blk) { return (blk >> INTN_SHIFT) * 4; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 dz = intn_dz(sc[0]);
    return make_float4(dz.x, dz.x, -dz.x * dz.y, -dz.x * dz.y);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const uint2 w = *(const uint2*)q;
    b0 = two_bit_lanes(w.x, t);
    b1 = two_bit_lanes(w.y, t);
}
