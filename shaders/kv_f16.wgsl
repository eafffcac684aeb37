// kv_f16    the cache rows attention reads, as IEEE halves (joined in front of attention_chunk for an f16 cache)
// Layout    k_cache, v_cache: [n_slots, kv_dim] f16, two per u32 word (value 2i in the low half), read as vec2<u32>s
// Launch    none (library text)
// Numerics  each half widened to f32 exactly (unpack2x16float; no SHADER_F16 needed)

@group(0) @binding(2) var<storage, read> k_cache: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec2<u32>>;

// Values 4·col4 .. 4·col4 + 3 of the slot's row.
fn kv_load(from_v: bool, slot: u32, col4: u32) -> vec4<f32> {
    let at = slot * (params.n_kv_heads * params.head_dim / 4u) + col4;
    var w: vec2<u32>;
    if (from_v) {
        w = v_cache[at];
    } else {
        w = k_cache[at];
    }
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
