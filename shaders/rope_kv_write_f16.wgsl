// rope_kv_write_f16  rope(q), rope(k) in place, then k_cache[slot[t]] = f16(k[t]), v_cache[slot[t]] = f16(v[t]): rope.wgsl
//                    twice and kv_write_f16.wgsl in one dispatch (an f16 cache; n_rot and head_dim multiples of 4)
// Layout             q: [n_tokens, n_heads · hd]; k, v: [n_tokens, n_kv_heads · hd] f32; pos, slot: u32 [n_tokens]; ff as
//                    rope's; caches: [n_slots, kv_dim / 2] u32 words of two halves (value 2i in the low half)
// Launch             one thread per q pair i < n_rot / 2, then per k quad j < hd / 4 (pairs 2j and 2j + 1 rotated below
//                    n_rot, four values copied above: whole cache words either way, in the normal and the neox
//                    pairing), then per pair of v values, flattened over a 2D grid of 256-thread groups
// Numerics           rope's rotation, then kv_write_f16's rounding (f16_bits): the bits of the three ops

// Bindings 0–2 and 4–6, cs_at and rope_q come from rope_kv_common.wgsl. v is read as its bits (as kv_write_f16
// reads it): a float load could flush or canonicalize them.
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(7) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(8) var<storage, read_write> v_cache: array<u32>;

// Two halves as one cache word.
fn pack(a: f32, b: f32) -> u32 {
    return f16_bits(bitcast<u32>(a)) | (f16_bits(bitcast<u32>(b)) << 16u);
}

// Quad j of k head `head` (t · n_kv_heads + h): below n_rot its pairs 2j and 2j + 1, rotated in place, which cover two
// whole cache words (normal: values 4j .. 4j + 3; neox: 2j, 2j + 1 and the same n_rot / 2 further); above it four
// unrotated values. Either way the two words go to the cache row of token t's slot.
fn rope_k(head: u32, j: u32) {
    let t = head / params.n_kv_heads;
    let base = head * params.head_dim;
    var w0: vec2<u32>; // the two words' first values, relative to the head
    var w1: vec2<u32>;
    var r0: vec2<f32>;
    var r1: vec2<f32>;
    if (4u * j < params.n_rot) {
        let a = rope_pair(2u * j, params.n_rot, params.neox);
        let b = rope_pair(2u * j + 1u, params.n_rot, params.neox);
        let ra = rotate(k[base + a.x], k[base + a.y], cs_at(t, 2u * j));
        let rb = rotate(k[base + b.x], k[base + b.y], cs_at(t, 2u * j + 1u));
        k[base + a.x] = ra.x;
        k[base + a.y] = ra.y;
        k[base + b.x] = rb.x;
        k[base + b.y] = rb.y;
        if (params.neox != 0u) {
            w0 = vec2<u32>(a.x, b.x);
            w1 = vec2<u32>(a.y, b.y);
            r0 = vec2<f32>(ra.x, rb.x);
            r1 = vec2<f32>(ra.y, rb.y);
        } else {
            w0 = a;
            w1 = b;
            r0 = ra;
            r1 = rb;
        }
    } else {
        w0 = vec2<u32>(4u * j, 4u * j + 1u);
        w1 = vec2<u32>(4u * j + 2u, 4u * j + 3u);
        r0 = vec2<f32>(k[base + w0.x], k[base + w0.y]);
        r1 = vec2<f32>(k[base + w1.x], k[base + w1.y]);
    }
    let s = slot[t];
    if (s < params.n_slots) {
        // From the head's values to its words in the slot's row (kv_dim / 2 words).
        let row = s * (params.n_kv_heads * params.head_dim / 2u) + (head % params.n_kv_heads) * (params.head_dim / 2u);
        k_cache[row + w0.x / 2u] = pack(r0.x, r0.y);
        k_cache[row + w1.x / 2u] = pack(r1.x, r1.y);
    }
}

@compute @workgroup_size(256)
fn rope_kv_write_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lane: u32) {
    let idx = (wg.x + wg.y * nwg.x) * 256u + lane;
    let half_rot = params.n_rot / 2u;
    let quads = params.head_dim / 4u;
    let q_pairs = params.n_tokens * params.n_heads * half_rot;
    let k_quads = params.n_tokens * params.n_kv_heads * quads;
    let kv_words = params.n_kv_heads * params.head_dim / 2u;
    if (idx < q_pairs) {
        rope_q(idx / half_rot, idx % half_rot);
    } else if (idx < q_pairs + k_quads) {
        let j = idx - q_pairs;
        rope_k(j / quads, j % quads);
    } else if (idx < q_pairs + k_quads + params.n_tokens * kv_words) {
        let j = idx - q_pairs - k_quads;
        let s = slot[j / kv_words];
        if (s < params.n_slots) {
            v_cache[s * kv_words + j % kv_words] = f16_bits(v[2u * j]) | (f16_bits(v[2u * j + 1u]) << 16u);
        }
    }
}
