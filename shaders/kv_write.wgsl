// kv_write  k_cache[slot[t], c] = k[t, c];  v_cache[slot[t], c] = v[t, c]
// Layout    k, v: [n_tokens, kv_dim] f32; slot: u32 [n_tokens]; k_cache, v_cache: [n_slots, kv_dim]
// Launch    one thread per element of k, 256-thread groups over a 2D grid
// Numerics  exact copy (slots ≥ n_slots are skipped)

struct Params { n: u32, kv_dim: u32, n_slots: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> slot: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;

@compute @workgroup_size(256)
fn kv_write(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        let s = slot[i / params.kv_dim];
        if (s < params.n_slots) {
            let o = s * params.kv_dim + i % params.kv_dim;
            k_cache[o] = k[i];
            v_cache[o] = v[i];
        }
    }
}
