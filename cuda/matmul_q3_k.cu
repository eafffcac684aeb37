// matmul_q3_k  block decoder for Q3_K, joined between common.cuh and a body (matmul.cu, matmul_mma.cu, embed.cu)
// Layout       repacked on upload (src/backend/cuda/repack.rs) into 32-value blocks: qs [blocks][8] low 2 bits
//              (word h, byte i, bits 2p = value 16h+4p+i), qh [blocks] u32 of the hmask bits (bit i → value i);
//              GGUF spreads a block over 32 + 32 bytes shared with 3 and 7 others. dm [super-blocks][16] = GGUF's
//              12 bytes of 6-bit scales (one per 16 values), f16 d, 2 zero bytes. Value i of block j:
//              w = (d·(sc - 32))·(q - 4), sc the scale of values 32j + 16·(i/16).., q = low | hmask << 2 in 0..7
// Launch       none (device functions only)
// Numerics     block_dot = d · d_x · (sc_0·Σ_{i<16} (q - 4) q_x + sc_1·Σ_{i≥16} (q - 4) q_x), exact int32 sums;
//              w_get is the reference's arithmetic

#define FORMAT_QUANTIZED 1
#define QS_BYTES 8

// Sub-block sub's (0..15) signed scale from the 12 scale bytes as words a (bytes 0..3), b, c: its low 4
// bits in byte sub % 8 (high nibble for sub ≥ 8), its top 2 in byte 8 + sub % 4 at bit 2·(sub / 4).
__device__ __forceinline__ int q3_k_scale(u32 a, u32 b, u32 c, u32 sub) {
    const u32 low = (((sub & 4) ? b : a) >> (8 * (sub & 3) + 4 * (sub >> 3))) & 15;
    const u32 high = (c >> (8 * (sub & 3) + 2 * (sub >> 2))) & 3;
    return (int)(low | high << 4) - 32;
}

// d · (scale - 32) of both halves of block blk, from its super-block's record r.
__device__ __forceinline__ float2 q3_k_scales(uint4 r, u64 blk) {
    const u32 j = blk & 7;
    const float d = f16_to_f32(r.w & 0xffff);
    return make_float2(__fmul_rn(d, (float)q3_k_scale(r.x, r.y, r.z, 2 * j)),
                       __fmul_rn(d, (float)q3_k_scale(r.x, r.y, r.z, 2 * j + 1)));
}

// Values 4p..4p+3 of a half as int8 q - 4, from the half's 2-bit word and its 16 hmask bits.
__device__ __forceinline__ u32 q3_k_lanes(u32 low, u32 high, u32 p) {
    return minus_bias(two_bit_lanes(low, p) | (spread_high_bits(high, 4 * p) >> 2), 4);
}

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    const u64 blk = row * (k / 32) + col / 32;
    const u32 i = col & 31;
    const float2 s = q3_k_scales(*(const uint4*)(dm + blk / 8 * 16), blk);
    const u32 q = two_bit_at(*(const uint2*)(qs + blk * 8), i) | ((((const u32*)qh)[blk] >> i) & 1) << 2;
    return __fmul_rn(i < 16 ? s.x : s.y, (float)((int)q - 4));
}

__device__ __forceinline__ float block_dot(const u8* qs, const u8* qh, const u8* dm, u64 blk, int4 x0, int4 x1,
                                           float2 xds) {
    const uint2 q = *(const uint2*)(qs + blk * 8);
    const u32 h = ((const u32*)qh)[blk];
    const uint4 r = *(const uint4*)(dm + blk / 8 * 16);
    const u32 j = blk & 7;
    const int a[4] = {x0.x, x0.y, x0.z, x0.w}, b[4] = {x1.x, x1.y, x1.z, x1.w};
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int p = 0; p < 4; p++) {
        s0 = dp4a((int)q3_k_lanes(q.x, h, p), a[p], s0);
        s1 = dp4a((int)q3_k_lanes(q.y, h >> 16, p), b[p], s1);
    }
    const int sc0 = q3_k_scale(r.x, r.y, r.z, 2 * j), sc1 = q3_k_scale(r.x, r.y, r.z, 2 * j + 1);
    return f16_to_f32(r.w & 0xffff) * xds.x * (float)(sc0 * s0 + sc1 * s1);
}

// Tensor-core path (matmul_mma.cu): the super-block's 16-byte record per k step; a scale per 16-value half.
#define QH_BYTES 4
#define SC_BYTES 16
__device__ __forceinline__ u64 sc_offset(u64 blk) { return blk / 8 * 16; }
__device__ __forceinline__ float4 mma_scale(const u32* sc, u64 blk) {
    const float2 s = q3_k_scales(make_uint4(sc[0], sc[1], sc[2], sc[3]), blk);
    return make_float4(s.x, s.y, 0.0f, 0.0f);
}
__device__ __forceinline__ void mma_b(const u8* q, const u32* qh, u32 t, u32& b0, u32& b1) {
    const uint2 w = *(const uint2*)q;
    b0 = q3_k_lanes(w.x, qh[0], t);
    b1 = q3_k_lanes(w.y, qh[0] >> 16, t);
}
