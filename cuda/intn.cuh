// intn.cuh  helpers of the group-wise INT-b / NF4 decoders (matmul_int*.cu, matmul_nf4*.cu), joined before them
// Layout    the backend puts `#define INTN_SHIFT s` first: a block (a group; NF4_DQ two) is 32 << s values, so 32-value
//           run b of the weight belongs to block b >> s; a block's header is one u32 in dm (its GGUF bytes 0..4)
// Launch    LEVELS formats (NF4): every thread of a kernel that reads nf4_f16 calls levels_init() first, then the
//           block synchronises before the first read (matmul_mma.cu); the GEMV's integer levels need no table
// Numerics  NF4_LEVELS are bitsandbytes' f32 constants (src/quant/intn/mod.rs), each written so it parses to that f32;
//           nf4_f16 rounds them to nearest f16 for the tensor-core fragments (NMSE 2.4e-8 over the 16 levels);
//           the GEMV's integer levels round(NF4·32512) are within 1.4e-5 of each level (NMSE 2.6e-10 over the 16)

__constant__ float NF4_LEVELS[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

// A per-block copy of the f16 levels: lanes look them up by their own codes, which the constant cache would serialise.
__shared__ u16 nf4_f16[16];

__device__ __forceinline__ void levels_init() {
    if (threadIdx.x < 16) nf4_f16[threadIdx.x] = f32_to_f16(NF4_LEVELS[threadIdx.x]);
}

// NF4's levels as integers for dp4a: round(NF4[c]·NF4_INT_SCALE) = 256·hi[c] + lo[c] with hi, lo int8, byte c of
// the 16-byte tables NF4_HI and NF4_LO (four u32 each, lowest byte first). 32512 = 127·256 puts ±1 at hi = ±127,
// lo = 0. src/backend/cuda/kernels.rs recomputes these words from src/quant/intn's NF4 in a unit test.
#define NF4_INT_SCALE 32512.0f
#define NF4_HI 0xcebda881u, 0x00f4e9dcu, 0x2b1f140au, 0x7f5c4738u
#define NF4_LO 0xd8519500u, 0x007089e0u, 0xea42701bu, 0x00d174f8u

// Byte t[c] of a 16-byte table (t0..t3) for each of the 8 nibbles c of w, with no memory access: .x holds the low
// nibbles' bytes (byte i of w), .y the high nibbles'. __byte_perm reads 3 bits of each selector nibble, so two
// perms look the nibble up in each 8-byte half and a third keeps the half its bit 3 names.
__device__ __forceinline__ uint2 lookup16(u32 w, u32 t0, u32 t1, u32 t2, u32 t3) {
    u32 r[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const u32 s = w >> (16 * h);  // nibbles 4h..4h+3: low and high of bytes 2h and 2h + 1
        const u32 a = __byte_perm(t0, t1, s), b = __byte_perm(t2, t3, s);
        r[h] = __byte_perm(a, b, 0x3210u | ((s & 0x8888u) >> 1));
    }
    return make_uint2(__byte_perm(r[0], r[1], 0x6420u), __byte_perm(r[0], r[1], 0x7531u));
}

// The header word of the block holding 32-value run blk.
__device__ __forceinline__ u32 intn_header(const u8* dm, u64 blk) { return ((const u32*)dm)[blk >> INTN_SHIFT]; }

// (d, z) of an INT-b header: f16 d, the zero point in byte 2.
__device__ __forceinline__ float2 intn_dz(u32 h) { return make_float2(f16_to_f32(h & 0xffff), (float)((h >> 16) & 0xff)); }

// Σ_j round(NF4[q_j]·NF4_INT_SCALE) · x_j over one run (codes in Q4_0's nibble order): exact in int32, the hi and
// lo bytes of the levels in two dp4a chains (|Σ| ≤ 32·32512·127 < 2^31).
__device__ __forceinline__ int dot_levels(uint4 q, int4 x0, int4 x1) {
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    const int a[4] = {x0.x, x0.y, x0.z, x0.w};
    const int b[4] = {x1.x, x1.y, x1.z, x1.w};
    int hi = 0, lo = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint2 h = lookup16(w[i], NF4_HI), l = lookup16(w[i], NF4_LO);
        hi = dp4a((int)h.x, a[i], hi);
        hi = dp4a((int)h.y, b[i], hi);
        lo = dp4a((int)l.x, a[i], lo);
        lo = dp4a((int)l.y, b[i], lo);
    }
    return 256 * hi + lo;
}

// Tensor-core fragments of NF4 codes (MMA_B_F16): b[0] = levels of values 4t..4t+3, b[1] = of 16+4t..16+4t+3, as
// f16x2 pairs (the layout i8x4_to_f16 gives the integer formats).
__device__ __forceinline__ void levels_b(const u8* q, u32 t, u32 b[2][2]) {
    const u32 w = *(const u32*)(q + 4 * t);
    const auto pair = [](u32 c0, u32 c1) { return (u32)nf4_f16[c0 & 15] | (u32)nf4_f16[c1 & 15] << 16; };
    b[0][0] = pair(w, w >> 8);
    b[0][1] = pair(w >> 16, w >> 24);
    b[1][0] = pair(w >> 4, w >> 12);
    b[1][1] = pair(w >> 20, w >> 28);
}
