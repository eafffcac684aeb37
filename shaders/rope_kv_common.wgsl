// rope_kv_common  what rope_kv_write and rope_kv_write_f16 share (joined in front of both): their params, the q, k,
//                 pos, slot and ff bindings, cos/sin at a token's position, and the rotation of a q pair
// Layout          as rope_kv_write's
// Launch          none (library text)
// Numerics        rope's rotation (rope_common)

struct Params {
    n_tokens: u32, n_heads: u32, n_kv_heads: u32, head_dim: u32,
    n_rot: u32, theta: f32, freq_scale: f32, neox: u32,
    has_ff: u32, n_slots: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> k: array<f32>;
// Binding 3, v, and bindings 7 and 8, the caches, are the kernel's own (f32, or bits for an f16 cache).
@group(0) @binding(4) var<storage, read> pos: array<u32>;
@group(0) @binding(5) var<storage, read> slot: array<u32>;
@group(0) @binding(6) var<storage, read> ff: array<f32>;

// cos and sin of pair i at token t's position.
fn cs_at(t: u32, i: u32) -> vec2<f32> {
    var f = 1.0;
    if (params.has_ff != 0u) {
        f = ff[i];
    }
    return rope_cs(pos[t], i, params.n_rot, params.theta, params.freq_scale, f);
}

// Pair i of head `head` (t · n_heads + h) of q, rotated in place.
fn rope_q(head: u32, i: u32) {
    let p = rope_pair(i, params.n_rot, params.neox) + vec2<u32>(head * params.head_dim);
    let r = rotate(q[p.x], q[p.y], cs_at(head / params.n_heads, i));
    q[p.x] = r.x;
    q[p.y] = r.y;
}
