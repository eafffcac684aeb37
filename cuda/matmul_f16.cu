// matmul_f16  element decoder for F16 weights, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout      qs = the GGUF bytes unchanged: [rows][k] IEEE half
// Launch      none (device functions only)
// Numerics    exact widening to f32 (PTX cvt)

#define FORMAT_QUANTIZED 0

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    return f16_to_f32(((const u16*)qs)[row * k + col]);
}
