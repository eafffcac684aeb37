// kv_q8     the cache rows attention reads, from q8_0 blocks (joined in front of attention_chunk for a q8_0 cache)
// Layout    k_cache, v_cache: [n_slots, row] u32 words, row = kv4 words of int8 values (4 per word: one vec4) then
//           ceil(kv4 / 16) words of f16 block scales, two per word (src/backend/kv_q8.rs), kv4 = n_kv_heads · head_dim / 4
// Launch    none (library text)
// Numerics  q · d exactly in f32 (an 8-bit integer times an f16), as the host's read_f32

@group(0) @binding(2) var<storage, read> k_cache: array<u32>;
@group(0) @binding(3) var<storage, read> v_cache: array<u32>;

// Values 4·col4 .. 4·col4 + 3 of the slot's row.
fn kv_load(from_v: bool, slot: u32, col4: u32) -> vec4<f32> {
    let kv4 = params.n_kv_heads * params.head_dim / 4u;
    let row = slot * (kv4 + (kv4 + 15u) / 16u);
    let at_scale = row + kv4 + col4 / 16u;
    var q: u32;
    var s: u32;
    if (from_v) {
        q = v_cache[row + col4];
        s = v_cache[at_scale];
    } else {
        q = k_cache[row + col4];
        s = k_cache[at_scale];
    }
    let d = unpack2x16float(s)[(col4 / 8u) & 1u];
    // Each byte moved to the top, then shifted down with its sign.
    let bytes = bitcast<vec4<i32>>(vec4<u32>(q << 24u, q << 16u, q << 8u, q)) >> vec4<u32>(24u);
    return vec4<f32>(bytes) * d;
}
