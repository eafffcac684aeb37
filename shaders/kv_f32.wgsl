// kv_f32    the cache rows attention reads, as f32 (joined in front of attention_chunk for an f32 cache)
// Layout    k_cache, v_cache: [n_slots, kv_dim] f32, read as vec4s (4 values of one row)
// Launch    none (library text)
// Numerics  exact

@group(0) @binding(2) var<storage, read> k_cache: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<f32>>;

// Values 4·col4 .. 4·col4 + 3 of the slot's row.
fn kv_load(from_v: bool, slot: u32, col4: u32) -> vec4<f32> {
    let at = slot * (params.n_kv_heads * params.head_dim / 4u) + col4;
    if (from_v) {
        return v_cache[at];
    }
    return k_cache[at];
}
