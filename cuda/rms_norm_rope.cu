// rms_norm_rope  per head: h = h · gain / sqrt(mean(h²) + eps), then rope(h) as rope.cu (joined after it)
// Layout         x: [n_tokens, n_heads · head_dim] f32 in place; gain: [head_dim]; pos: u32 [n_tokens]; ff as rope.cu
// Launch         one block per (token, head): grid.x = n_tokens · n_heads
// Numerics       block_sum of squares in f32; every thread reads the sum before any thread writes

extern "C" __global__ void rms_norm_rope(float* x, const float* gain, float eps, const u32* pos, u32 n_heads,
                                         u32 head_dim, u32 n_rot, float theta, float freq_scale, u32 neox,
                                         const float* ff) {
    GRID_DEPENDENCY_WAIT();
    const u32 t = blockIdx.x / n_heads;
    float* h = x + (u64)blockIdx.x * head_dim;
    float sum_sq = 0.0f;
    for (u32 i = threadIdx.x; i < head_dim; i += blockDim.x) sum_sq += h[i] * h[i];
    sum_sq = block_sum(sum_sq);  // ends with a barrier-protected read: no thread has written yet
    const float scale = rsqrtf(sum_sq / (float)head_dim + eps);
    rope_head(h, pos[t], head_dim, n_rot, theta, freq_scale, neox, scale, gain, ff);
}
