// attention_combine  split-K flash decoding, pass 2: dst[t, h, d] = Σ_c e^(m_c - M) o_c[d] / Σ_c e^(m_c - M) l_c
// Layout             part: [n_tokens, n_heads, n_chunks, hd + 2] = (m, l, o[hd]); dst: [n_tokens, n_heads · hd]
// Launch             grid (n_heads, n_tokens); 64 threads, one output dimension each (strided)
// Numerics           f32; chunks in a fixed order; a token with no keys (l = 0) gets zeros

const WG: u32 = 64u;

struct Params { n_heads: u32, head_dim: u32, n_chunks: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn attention_combine(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd = params.head_dim;
    let th = wg.y * params.n_heads + wg.x;
    let first = th * params.n_chunks * (hd + 2u);
    var big_m = -3.4028235e38;
    for (var c = 0u; c < params.n_chunks; c++) {
        big_m = max(big_m, part[first + c * (hd + 2u)]);
    }
    var l = 0.0;
    for (var c = 0u; c < params.n_chunks; c++) {
        let b = first + c * (hd + 2u);
        l += part[b + 1u] * exp(part[b] - big_m);
    }
    let inv = select(0.0, 1.0 / l, l > 0.0);
    for (var d = lane; d < hd; d += WG) {
        var acc = 0.0;
        for (var c = 0u; c < params.n_chunks; c++) {
            let b = first + c * (hd + 2u);
            acc += part[b + 2u + d] * exp(part[b] - big_m);
        }
        dst[th * hd + d] = acc * inv;
    }
}
