// matmul_f32  element decoder for F32 weights, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout      qs = the GGUF bytes unchanged: [rows][k] f32
// Launch      none (device functions only)
// Numerics    exact

#define FORMAT_QUANTIZED 0

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    return ((const float*)qs)[row * k + col];
}
