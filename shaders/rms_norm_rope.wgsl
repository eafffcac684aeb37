// rms_norm_rope  per head: y = x · gain / sqrt(mean(x²) + eps), then RoPE of y by pos[t], in place
// Layout         x: [n_tokens, n_heads · head_dim] f32; gain: [head_dim]; pos: u32 [n_tokens]; ff as rope.wgsl
// Launch         grid (n_heads, n_tokens); 64 threads per head
// Numerics       f32 tree-reduced sum of squares; rotation as rope.wgsl

const WG: u32 = 64u;

struct Params {
    n_tokens: u32, n_heads: u32, head_dim: u32, n_rot: u32, theta: f32, freq_scale: f32, neox: u32, has_ff: u32, eps: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> gain: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read> ff: array<f32>;

@compute @workgroup_size(WG)
fn rms_norm_rope(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd = params.head_dim;
    let base = (wg.y * params.n_heads + wg.x) * hd;
    var sum_sq = 0.0;
    for (var i = lane; i < hd; i += WG) {
        let v = x[base + i];
        sum_sq = fma(v, v, sum_sq);
    }
    let scale = row_scale(sum_sq, hd, params.eps, lane);
    let half_rot = params.n_rot / 2u;
    for (var i = lane; i < half_rot; i += WG) {
        var f = 1.0;
        if (params.has_ff != 0u) {
            f = ff[i];
        }
        let cs = rope_cs(pos[wg.y], i, params.n_rot, params.theta, params.freq_scale, f);
        let p = rope_pair(i, params.n_rot, params.neox);
        let a = x[base + p.x] * scale * gain[p.x];
        let b = x[base + p.y] * scale * gain[p.y];
        x[base + p.x] = a * cs.x - b * cs.y;
        x[base + p.y] = a * cs.y + b * cs.x;
    }
    for (var i = params.n_rot + lane; i < hd; i += WG) {
        x[base + i] = x[base + i] * scale * gain[i];
    }
}
