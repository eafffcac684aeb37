// rope      rotates each head of x[t, :] in place: (a, b) → (a cos θ - b sin θ, a sin θ + b cos θ),
//           θ = pos[t] · freq_scale · theta^(-2i / n_rot) / ff[i] for pair i < n_rot / 2 (ff: frequency factors,
//           null for none); dims ≥ n_rot pass through
// Layout    x: [n_tokens, n_heads · head_dim] f32; pos: u32 [n_tokens]; pairs (2i, 2i+1) (normal) or (i, i + n_rot/2) (neox)
// Launch    one block per (token, head): grid.x = n_tokens · n_heads; threads stride over the pairs
// Numerics  θ in f32 (powf, then sincosf at full precision), as ggml computes it

__device__ __forceinline__ void rope_head(float* h, u32 p, u32 head_dim, u32 n_rot, float theta, float freq_scale,
                                          u32 neox, float scale, const float* gain, const float* ff) {
    const u32 half_rot = n_rot / 2;
    for (u32 i = threadIdx.x; i < half_rot + (head_dim - n_rot); i += blockDim.x) {
        if (i < half_rot) {
            const u32 ia = neox ? i : 2 * i, ib = neox ? i + half_rot : 2 * i + 1;
            const float ga = gain ? gain[ia] : 1.0f, gb = gain ? gain[ib] : 1.0f;
            const float a = h[ia] * scale * ga, b = h[ib] * scale * gb;
            const float freq = powf(theta, -(float)(2 * i) / (float)n_rot) / (ff ? ff[i] : 1.0f);
            const float angle = (float)p * freq_scale * freq;
            float s, c;
            sincosf(angle, &s, &c);
            h[ia] = a * c - b * s;
            h[ib] = a * s + b * c;
        } else {
            const u32 j = n_rot + (i - half_rot);
            h[j] = h[j] * scale * (gain ? gain[j] : 1.0f);
        }
    }
}

extern "C" __global__ void rope(float* x, const u32* pos, u32 n_heads, u32 head_dim, u32 n_rot, float theta,
                                float freq_scale, u32 neox, const float* ff) {
    GRID_DEPENDENCY_WAIT();
    const u32 t = blockIdx.x / n_heads;
    float* h = x + (u64)blockIdx.x * head_dim;
    rope_head(h, pos[t], head_dim, n_rot, theta, freq_scale, neox, 1.0f, 0, ff);
}
