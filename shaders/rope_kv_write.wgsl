// rope_kv_write  rope(q), rope(k) in place, then k_cache[slot[t]] = k[t], v_cache[slot[t]] = v[t]: rope.wgsl twice and
//                kv_write.wgsl in one dispatch (an f32 cache)
// Layout         q: [n_tokens, n_heads · hd]; k, v: [n_tokens, n_kv_heads · hd] f32; pos, slot: u32 [n_tokens]; ff as rope's
// Launch         one thread per q pair i < n_rot / 2, then per k pair c < hd / 2 (rotated below n_rot, copied above), then
//                per v value, flattened over a 2D grid of 256-thread groups. Numerics: rope's rotation, exact copies

// Bindings 0–2 and 4–6, cs_at and rope_q come from rope_kv_common.wgsl.
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(7) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(8) var<storage, read_write> v_cache: array<f32>;

// Pair c of k head `head` (t · n_kv_heads + h): rotated in place below n_rot / 2, the next two unrotated values
// above; either way into the cache row of token t's slot.
fn rope_k(head: u32, c: u32) {
    let t = head / params.n_kv_heads;
    let half_rot = params.n_rot / 2u;
    var p: vec2<u32>;
    var r: vec2<f32>;
    if (c < half_rot) {
        p = rope_pair(c, params.n_rot, params.neox) + vec2<u32>(head * params.head_dim);
        r = rotate(k[p.x], k[p.y], cs_at(t, c));
        k[p.x] = r.x;
        k[p.y] = r.y;
    } else {
        p = vec2<u32>(params.n_rot + 2u * (c - half_rot)) + vec2<u32>(0u, 1u) + vec2<u32>(head * params.head_dim);
        r = vec2<f32>(k[p.x], k[p.y]);
    }
    let s = slot[t];
    if (s < params.n_slots) {
        // From the token's row of k to its slot's row of the cache.
        let kv_dim = params.n_kv_heads * params.head_dim;
        let at = vec2<u32>(s * kv_dim) + p - vec2<u32>(t * kv_dim);
        k_cache[at.x] = r.x;
        k_cache[at.y] = r.y;
    }
}

@compute @workgroup_size(256)
fn rope_kv_write(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lane: u32) {
    let idx = (wg.x + wg.y * nwg.x) * 256u + lane;
    let half_rot = params.n_rot / 2u;
    let q_pairs = params.n_tokens * params.n_heads * half_rot;
    let k_pairs = params.n_tokens * params.n_kv_heads * (params.head_dim / 2u);
    let kv_dim = params.n_kv_heads * params.head_dim;
    if (idx < q_pairs) {
        rope_q(idx / half_rot, idx % half_rot);
    } else if (idx < q_pairs + k_pairs) {
        let j = idx - q_pairs;
        rope_k(j / (params.head_dim / 2u), j % (params.head_dim / 2u));
    } else if (idx < q_pairs + k_pairs + params.n_tokens * kv_dim) {
        let j = idx - q_pairs - k_pairs;
        let s = slot[j / kv_dim];
        if (s < params.n_slots) {
            v_cache[s * kv_dim + j % kv_dim] = v[j];
        }
    }
}
