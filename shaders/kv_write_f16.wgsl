// kv_write_f16  k_cache[slot[t], c] = f16(k[t, c]);  v_cache[slot[t], c] = f16(v[t, c])  (an f16 cache)
// Layout        k, v: [n_tokens, kv_dim] f32 (kv_dim even); slot: u32 [n_tokens]; caches: [n_slots, kv_dim / 2] u32 words
// Launch        one thread per pair of values (one cache word), 256-thread groups over a 2D grid
// Numerics      round to nearest even, overflow to ±inf, written out in integer arithmetic: the host's `half` bits on every driver

struct Params { pairs: u32, kv_words: u32, n_slots: u32 }

@group(0) @binding(0) var<uniform> params: Params;
// The f32 inputs are read as their bits: a float load could flush or canonicalize them.
@group(0) @binding(1) var<storage, read> k: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> v: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> slot: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;

// The f16 bits of the f32 with bits b, rounded to nearest even. pack2x16float's rounding is the driver's
// choice, so it is not used.
fn f16_bits(b: u32) -> u32 {
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u | ((a >> 13u) & 0x3ffu); // NaN stays NaN (quiet)
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u; // ≥ 65520 rounds to infinity
    }
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u; // exponent rebiased from 127 to 15
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (a <= 0x33000000u) {
        return sign; // ≤ 2^-25 rounds to zero (2^-25 itself ties to the even 0)
    }
    // A subnormal half: the mantissa with its leading 1, shifted to units of 2^-24.
    let m = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - (a >> 23u);
    let h = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let tie = 1u << (shift - 1u);
    return sign | (h + select(0u, 1u, rem > tie || (rem == tie && (h & 1u) == 1u)));
}

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
