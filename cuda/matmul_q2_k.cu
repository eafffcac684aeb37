// matmul_q2_k  block decoder for Q2_K, joined between common.cuh and a body (matmul.cu, matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value blocks: qs [blocks][8] 2-bit levels
//              (word h, byte i, bits 2p = value 16h+4p+i; GGUF spreads a block over 32 bytes shared with 3 others);
//              dm [super-blocks][20] = GGUF's 16 scale bytes (one per 16 values: low nibble sc, high nibble m),
//              f16 d, f16 dmin. Value i of block j: w = (d·sc)·q - dmin·m, (sc, m) from byte 2j + i/16, q in 0..3
// Launch       none (device functions only)
// Numerics     block_dot = d_x · (d · Σ_halves sc_h Σ q_w q_x - dmin · Σ_halves m_h Σ q_x), exact int32 sums (the
//              mins' sums by dp4a against m_h in every byte); w_get is the reference's arithmetic, each step rounded

#define FORMAT_QUANTIZED 1
#define QS_BYTES 8

// The (scale, min) bytes of block j's two halves (bits 0..7 and 8..15), and (d, dmin), from a record r.
__device__ __forceinline__ u32 q2_k_scales(const u8* r, u32 j, float2& dd) {
    const u32 w = ((const u32*)r)[4];
    dd = make_float2(f16_to_f32(w & 0xffff), f16_to_f32(w >> 16));
    return ((const u16*)r)[j];
}

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const u32 i = col & 31;
    float2 dd;
    const u32 sm = q2_k_scales(dm + blk / 8 * 20, blk & 7, dd) >> ((i & 16) >> 1);  // this half's byte
    const float dl = __fmul_rn(dd.x, (float)(sm & 15)), ml = __fmul_rn(dd.y, (float)((sm >> 4) & 15));
    return __fsub_rn(__fmul_rn(dl, (float)two_bit_at(*(const uint2*)(qs + blk * 8), i)), ml);
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint2 q = *(const uint2*)(qs + blk * 8);
    float2 dd;
    const u32 sm = q2_k_scales(dm + blk / 8 * 20, blk & 7, dd);
    const int m0 = (int)((sm >> 4) & 15) * 0x01010101, m1 = (int)(sm >> 12) * 0x01010101;
    const int a[4] = {x0.x, x0.y, x0.z, x0.w}, b[4] = {x1.x, x1.y, x1.z, x1.w};
    int s0 = 0, s1 = 0, mins = 0;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        s0 = dp4a((int)two_bit_lanes(q.x, p), a[p], s0);
        s1 = dp4a((int)two_bit_lanes(q.y, p), b[p], s1);
        mins = dp4a(m0, a[p], dp4a(m1, b[p], mins));
    }
    const int scaled = (int)(sm & 15) * s0 + (int)((sm >> 8) & 15) * s1;
    return xds.x * (dd.x * (float)scaled - dd.y * (float)mins);
}

// Tensor-core path (matmul_mma.cu): the super-block's 20-byte record per k step; a scale and a min per
// 16-value half.
#define QH_BYTES 0
#define SC_BYTES 20
__device__ __forceinline__ u64 sc_offset(u64 blk) { return blk / 8 * 20; }
// sc: the record as 5 words in registers.
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 dd = make_float2(f16_to_f32(sc[4] & 0xffff), f16_to_f32(sc[4] >> 16));
    const u32 sm = (record_word(sc, blk & 7) >> (16 * (blk & 1))) & 0xffff;
    return make_float4(__fmul_rn(dd.x, (float)(sm & 15)), __fmul_rn(dd.x, (float)((sm >> 8) & 15)),
                       -__fmul_rn(dd.y, (float)((sm >> 4) & 15)), -__fmul_rn(dd.y, (float)(sm >> 12)));
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const uint2 w = *(const uint2*)q;
    b0 = two_bit_lanes(w.x, t);
    b1 = two_bit_lanes(w.y, t);
}
