// rope      x[t, h·hd + a], x[t, h·hd + b] ← rotation of the pair by angle pos[t] · freq_scale · theta^(-2i/n_rot) / ff[i]
// Layout    x: [n_tokens, n_heads · head_dim] f32, in place; pos: u32 [n_tokens]; ff: [n_rot / 2] frequency factors,
//           read only when has_ff (else any buffer is bound there); pairs from rope_pair
// Launch    one thread per (token, head, pair i < n_rot / 2), flattened over a 2D grid of 256-thread groups
// Numerics  f32; angles reduced mod 2π before sin/cos (rope_common.wgsl)

struct Params { n_tokens: u32, n_heads: u32, head_dim: u32, n_rot: u32, theta: f32, freq_scale: f32, neox: u32, has_ff: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<u32>;
@group(0) @binding(3) var<storage, read> ff: array<f32>;

@compute @workgroup_size(256)
fn rope(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
    let idx = (wg.x + wg.y * nwg.x) * 256u + lane;
    let half_rot = params.n_rot / 2u;
    let i = idx % half_rot;
    let head = idx / half_rot; // t · n_heads + h
    if (head >= params.n_tokens * params.n_heads) {
        return;
    }
    let t = head / params.n_heads;
    var f = 1.0;
    if (params.has_ff != 0u) {
        f = ff[i];
    }
    let cs = rope_cs(pos[t], i, params.n_rot, params.theta, params.freq_scale, f);
    let p = rope_pair(i, params.n_rot, params.neox) + vec2<u32>(head * params.head_dim);
    let r = rotate(x[p.x], x[p.y], cs);
    x[p.x] = r.x;
    x[p.y] = r.y;
}
