// intn.cuh  helpers of the group-wise INT-b / NF4 decoders (matmul_int*.cu, matmul_nf4*.cu), joined before them
// Layout    the backend puts `#define INTN_SHIFT s` first: a block (a group; NF4_DQ two) is 32 << s values, so 32-value
//           run b of the weight belongs to block b >> s; a block's header is one u32 in dm (its GGUF bytes 0..4)
// Launch    LEVELS formats (NF4): every thread of a kernel that reads nf4_f32 / nf4_f16 calls levels_init() first,
//           then the block synchronises before the first read (matmul.cu's GEMV, matmul_mma.cu)
// Numerics  NF4_LEVELS are bitsandbytes' f32 constants (src/quant/intn/mod.rs), each written so it parses to that f32;
//           nf4_f16 rounds them to nearest f16 for the tensor-core fragments (NMSE 2.4e-8 over the 16 levels)

__constant__ float NF4_LEVELS[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

// Per-block copies of the levels: lanes look them up by their own codes, which the constant cache would serialise.
__shared__ float nf4_f32[16];
__shared__ u16 nf4_f16[16];

__device__ __forceinline__ void levels_init() {
    if (threadIdx.x < 16) {
        nf4_f32[threadIdx.x] = NF4_LEVELS[threadIdx.x];
        nf4_f16[threadIdx.x] = f32_to_f16(NF4_LEVELS[threadIdx.x]);
    }
}

// The header word of the block holding 32-value run blk.
__device__ __forceinline__ u32 intn_header(const u8* dm, u64 blk) { return ((const u32*)dm)[blk >> INTN_SHIFT]; }

// (d, z) of an INT-b header: f16 d, the zero point in byte 2.
__device__ __forceinline__ float2 intn_dz(u32 h) { return make_float2(f16_to_f32(h & 0xffff), (float)((h >> 16) & 0xff)); }

// Σ_j NF4[q_j] · x_j over one run (codes in Q4_0's nibble order), in f32 from the shared levels.
__device__ __forceinline__ float dot_levels(uint4 q, int4 x0, int4 x1) {
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    const int a[4] = {x0.x, x0.y, x0.z, x0.w};
    const int b[4] = {x1.x, x1.y, x1.z, x1.w};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const u32 c = w[i] >> (8 * e);
            s = fmaf(nf4_f32[c & 15], (float)(signed char)(a[i] >> (8 * e)), s);
            s = fmaf(nf4_f32[(c >> 4) & 15], (float)(signed char)(b[i] >> (8 * e)), s);
        }
    }
    return s;
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
