// matmul_q6_k  block decoder for Q6_K, joined between common.cuh and a body (matmul.cu, matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value blocks: qs [blocks][16] low nibbles
//              in Q4_0's order, qh [blocks][8] the 2-bit high parts (word h, byte i, bits 2p = value 16h+4p+i);
//              GGUF spreads a block over 64 + 32 bytes shared with 3 others. dm [super-blocks][20] = GGUF's 16
//              i8 scales (one per 16 values), f16 d, 2 zero bytes. Value i of block j: w = (d·sc)·(q - 32),
//              sc = scales[2j + i/16], q in 0..63
// Launch       none (device functions only)
// Numerics     block_dot = d · d_x · (sc_0·Σ_{i<16} (q - 32) q_x + sc_1·Σ_{i≥16} (q - 32) q_x), every sum and
//              product exact in int32 (|·| < 2^24, so exact in f32 too); w_get is the reference's arithmetic

#define FORMAT_QUANTIZED 1
#define QS_BYTES 16

// The two i8 scales of block j (values 0..15, 16..31) of a super-block, and its d, from its record r.
__device__ __forceinline__ int2 q6_k_scales(const u8* r, u32 j, float& d) {
    const u32 pair = ((const u16*)r)[j];
    d = f16_to_f32(((const u16*)r)[8]);
    return make_int2((signed char)(pair & 0xff), (signed char)(pair >> 8));
}

// Values 4p..4p+3 (half 0) or 16+4p.. (half 1) of a block as int8 q - 32, from a word of nibbles shifted to
// that half and the half's 2-bit word.
__device__ __forceinline__ u32 q6_k_lanes(u32 nibbles, u32 high, u32 p) {
    return minus_bias((nibbles & 0x0F0F0F0Fu) | (two_bit_lanes(high, p) << 4), 32);
}

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const u32 i = col & 31;
    float d;
    const int2 sc = q6_k_scales(dm + blk / 8 * 20, blk & 7, d);
    const int q = nibble_at(qs + blk * 16, 0, false, i) | (two_bit_at(*(const uint2*)(qh + blk * 8), i) << 4);
    return __fmul_rn(__fmul_rn(d, (float)(i < 16 ? sc.x : sc.y)), (float)(q - 32));
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint4 q = *(const uint4*)(qs + blk * 16);
    const uint2 h = *(const uint2*)(qh + blk * 8);
    float d;
    const int2 sc = q6_k_scales(dm + blk / 8 * 20, blk & 7, d);
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    const int a[4] = {x0.x, x0.y, x0.z, x0.w}, b[4] = {x1.x, x1.y, x1.z, x1.w};
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        s0 = dp4a((int)q6_k_lanes(w[p], h.x, p), a[p], s0);
        s1 = dp4a((int)q6_k_lanes(w[p] >> 4, h.y, p), b[p], s1);
    }
    return d * xds.x * (float)(sc.x * s0 + sc.y * s1);
}

// Tensor-core path (matmul_mma.cu): the super-block's 20-byte record per k step; a scale per 16-value half.
#define QH_BYTES 8
#define SC_BYTES 20
__device__ __forceinline__ u64 sc_offset(u64 blk) { return blk / 8 * 20; }
// sc: the record as 5 words in registers.
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const u32 pair = record_word(sc, blk & 7) >> (16 * (blk & 1));
    const float d = f16_to_f32(sc[4] & 0xffff);
    return make_float4(__fmul_rn(d, (float)(signed char)(pair & 0xff)), __fmul_rn(d, (float)(signed char)(pair >> 8)),
                       0.0f, 0.0f);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const u32 w = *(const u32*)(q + 4 * t);
    b0 = q6_k_lanes(w, qh[0], t);
    b1 = q6_k_lanes(w >> 4, qh[1], t);
}
