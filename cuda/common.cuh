// common.cuh  helpers prepended (as text) to every kernel file before NVRTC compiles it
// Layout      no layouts of its own: integer typedefs, f16/bf16 decoding, warp/block reductions, dp4a
// Launch      reductions assume blockDim.x is a multiple of 32 and at most 1024
// Numerics    f16 → f32 through PTX cvt (exact), f32 → f16 round to nearest even; sums in f32, butterfly order (xor shuffles)

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// Every kernel's first statement. With ULTRA_CUDA_PDL=1 a recorded step (src/backend/cuda/graph.rs)
// joins consecutive kernels by programmatic edges: a kernel's blocks may be launched once all blocks
// of the kernel before it have started, and this waits until that kernel has finished and its
// writes are visible. Nothing may touch global memory before it. Without such an edge (eager
// launches, the default) it returns at once; before sm_90 there is no such instruction.
#if __CUDA_ARCH__ >= 900
#define GRID_DEPENDENCY_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define GRID_DEPENDENCY_WAIT()
#endif

// NVRTC brings no cuda_fp16.h: decode halves with the PTX conversion instruction.
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float(((u32)h) << 16); }

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// A KV cache element (f32, or f16 as u16 bits) as f32, and back (round to nearest even): the attention,
// kv_write and copy_slots kernels are templates over the cache's element type.
__device__ __forceinline__ float kv_load(const float* p, u64 i) { return p[i]; }
__device__ __forceinline__ float kv_load(const u16* p, u64 i) { return f16_to_f32(p[i]); }
__device__ __forceinline__ void kv_store(float* p, u64 i, float v) { p[i] = v; }
__device__ __forceinline__ void kv_store(u16* p, u64 i, float v) { p[i] = f32_to_f16(v); }

// Four signed byte products summed into c (sm_61+).
__device__ __forceinline__ int dp4a(int a, int b, int c) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// The first key position a token at p sees with a sliding window of `window` keys (0: no window):
// keys p - window < j <= p (attention.cu, attention_prefill.cu).
__device__ __forceinline__ u32 first_key(u32 p, u32 window) { return window != 0 && p + 1 > window ? p + 1 - window : 0; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Sum over the whole block; every thread receives the total.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < n_warps ? partial[lane] : 0.0f;
    return warp_sum(v);
}

// ---- block decoding shared by the 4- and 5-bit formats --------------------------------------
// A repacked 4-bit block holds 16 bytes: byte j's low nibble is value j, its high nibble value j+16
// (GGUF's order). x0, x1 hold the activation block's values 0..15 and 16..31 as int8.

// The four fifth bits (bits base..base+3 of qh) moved to bit 4 of each byte.
__device__ __forceinline__ u32 spread_high_bits(u32 qh, u32 base) {
    const u32 h = qh >> base;
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// Σ_j q_j · x_j over one block of 4-bit values (0..15), plus the fifth bits when has_qh.
__device__ __forceinline__ int dot_nibbles(uint4 q, u32 qh, bool has_qh, int4 x0, int4 x1) {
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    const int a[4] = {x0.x, x0.y, x0.z, x0.w};
    const int b[4] = {x1.x, x1.y, x1.z, x1.w};
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        u32 lo = w[i] & 0x0F0F0F0Fu, hi = (w[i] >> 4) & 0x0F0F0F0Fu;
        if (has_qh) {
            lo |= spread_high_bits(qh, 4 * i);
            hi |= spread_high_bits(qh, 16 + 4 * i);
        }
        s = dp4a((int)lo, a[i], s);
        s = dp4a((int)hi, b[i], s);
    }
    return s;
}

// Value j (0..31) of a 4-bit block (with its fifth bit when has_qh).
__device__ __forceinline__ int nibble_at(const u8* q16, u32 qh, bool has_qh, u32 j) {
    const u8 byte = q16[j & 15];
    int v = j < 16 ? (byte & 15) : (byte >> 4);
    if (has_qh) v |= ((qh >> j) & 1u) << 4;
    return v;
}

// ---- block decoding shared by the k-quants (32-value blocks as src/backend/cuda/repack.rs lays them out)
// A 2-bit field holds 8 bytes per block: word h, byte i, bits 2p = value 16h + 4p + i.

// Values 4p..4p+3 of a half of a block from its 2-bit word, one per byte.
__device__ __forceinline__ u32 two_bit_lanes(u32 w, u32 p) { return (w >> (2 * p)) & 0x03030303u; }

// Value j (0..31) of a block's 2-bit field.
__device__ __forceinline__ u32 two_bit_at(uint2 w, u32 j) {
    return ((j < 16 ? w.x : w.y) >> (8 * (j & 3) + 2 * ((j >> 2) & 3))) & 3u;
}

// Per byte: v - bias for v in 0..2·bias-1, as int8 (bias 4, 32: the byte v + 128 - bias cannot carry).
__device__ __forceinline__ u32 minus_bias(u32 v, u32 bias) { return (v + (128u - bias) * 0x01010101u) ^ 0x80808080u; }

// Block j's 6-bit (scale, min) of a Q4_K/Q5_K super-block (ggml's get_scale_min_k4), from its 12
// scale bytes as words a (bytes 0..3), b (4..7), c (8..11): blocks 0..3 in the low 6 bits of bytes
// j and j + 4; blocks 4..7 in the nibbles of byte j + 4 with their top 2 bits in the spare bits.
__device__ __forceinline__ uint2 scale_min_k4(u32 a, u32 b, u32 c, u32 j) {
    const u32 sh = 8 * (j & 3), a8 = a >> sh, b8 = b >> sh, c8 = c >> sh;
    return j < 4 ? make_uint2(a8 & 63, b8 & 63)
                 : make_uint2((c8 & 15) | ((a8 >> 6) & 3) << 4, ((c8 >> 4) & 15) | ((b8 >> 6) & 3) << 4);
}

// (d·sc_j, dmin·m_j) of block blk (j = blk % 8) of a Q4_K/Q5_K super-block, from its record r: f16 d,
// f16 dmin, 12 scale bytes. Each product exact in f32 (11-bit by 6-bit).
__device__ __forceinline__ float2 k4_scales(uint4 r, u64 blk) {
    const uint2 sm = scale_min_k4(r.y, r.z, r.w, blk & 7);
    return make_float2(__fmul_rn(f16_to_f32(r.x & 0xffff), (float)sm.x), __fmul_rn(f16_to_f32(r.x >> 16), (float)sm.y));
}

// Word j / 2 of a record held in registers (w[0..3]), by selects: a runtime index would put it in local memory.
__device__ __forceinline__ u32 record_word(const u32* w, u32 j) {
    return (j & 4) ? ((j & 2) ? w[3] : w[2]) : ((j & 2) ? w[1] : w[0]);
}
