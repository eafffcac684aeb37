// kv_write_f16  k_cache[slot[t], c] = f16(k[t, c]);  v_cache[slot[t], c] = f16(v[t, c])  (an f16 cache)
// Layout        k, v: [n_tokens, kv_dim] f32 (kv_dim even); slot: u32 [n_tokens]; caches: [n_slots, kv_dim / 2] u32 words
// Launch        one thread per pair of values (one cache word), 256-thread groups over a 2D grid
// Numerics      round to nearest even, overflow to ±inf, written out in integer arithmetic (f16_bits.wgsl): the host's
//               `half` bits on every driver

struct Params { pairs: u32, kv_words: u32, n_slots: u32 }

@group(0) @binding(0) var<uniform> params: Params;
// The f32 inputs are read as their bits: a float load could flush or canonicalize them.
@group(0) @binding(1) var<storage, read> k: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> v: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> slot: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;

fn pack(x: vec2<u32>) -> u32 {
    return f16_bits(x.x) | (f16_bits(x.y) << 16u);
}

@compute @workgroup_size(256)
fn kv_write_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.pairs) {
        let s = slot[i / params.kv_words];
        if (s < params.n_slots) {
            let o = s * params.kv_words + i % params.kv_words;
            k_cache[o] = pack(k[i]);
            v_cache[o] = pack(v[i]);
        }
    }
}
