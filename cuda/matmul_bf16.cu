// matmul_bf16  element decoder for BF16 weights, joined between common.cuh and a body (matmul.cu, embed.cu)
// Layout       qs = the GGUF bytes unchanged: [rows][k] bfloat16
// Launch       none (device functions only)
// Numerics     exact widening to f32 (bits << 16)

#define FORMAT_QUANTIZED 0

__device__ __forceinline__ float w_get(const u8* qs, const u8* qh, const u8* dm, u64 row, u32 col, u32 k) {
    return bf16_to_f32(((const u16*)qs)[row * k + col]);
}
