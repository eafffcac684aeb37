// kv_write_q8  k_cache[slot[t]] = q8_0(k[t]);  v_cache[slot[t]] = q8_0(v[t])  (a q8_0 cache)
// Layout       k, v: [n_tokens, kv_dim] f32, kv_dim a multiple of 32; slot: u32 [n_tokens]; caches: [n_slots, row_words]
//              u32: kv_dim / 4 words of int8 values, then the f16 block scales two per word (src/backend/kv_q8.rs)
// Launch       one thread per (token, pair of blocks), the pair sharing a scale word; 256-thread groups over a 2D grid
// Numerics     kv_q8.rs's: d = max |x| · (1 / 127), q = round-half-even(x · (1 / d)) in f32, d stored as f16
//              (f16_bits): d is the host's bits, but the driver's 1 / d may put a value on a rounding edge one step
//              away from the host's. A block with an infinity or NaN stores a NaN scale and zeros

struct Params { n: u32, pairs: u32, kv_dim: u32, n_slots: u32, row_words: u32 }

@group(0) @binding(0) var<uniform> params: Params;
// The f32 inputs are read as their bits, so max |x| is an integer max that sees NaN and infinity.
@group(0) @binding(1) var<storage, read> k: array<u32>;
@group(0) @binding(2) var<storage, read> v: array<u32>;
@group(0) @binding(3) var<storage, read> slot: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;

fn value_bits(from_v: bool, i: u32) -> u32 {
    if (from_v) {
        return v[i];
    }
    return k[i];
}

fn store(from_v: bool, at: u32, word: u32) {
    if (from_v) {
        v_cache[at] = word;
    } else {
        k_cache[at] = word;
    }
}

// Block b of token t's row into the cache row starting at word `row`; returns the block's f16 scale bits.
fn block(from_v: bool, t: u32, b: u32, row: u32) -> u32 {
    let x0 = t * params.kv_dim + b * 32u;
    var amax = 0u;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, value_bits(from_v, x0 + j) & 0x7fffffffu);
    }
    if (amax >= 0x7f800000u) {
        for (var w = 0u; w < 8u; w++) {
            store(from_v, row + b * 8u + w, 0u);
        }
        return 0x7e00u;
    }
    // One correctly rounded product (1 / 127 in f32), not a division: the host's d on every driver.
    let d = bitcast<f32>(amax) * bitcast<f32>(0x3c010204u);
    let id = select(1.0 / d, 0.0, d == 0.0);
    for (var w = 0u; w < 8u; w++) {
        var word = 0u;
        for (var j = 0u; j < 4u; j++) {
            let x = bitcast<f32>(value_bits(from_v, x0 + 4u * w + j));
            let q = i32(clamp(round(x * id), -127.0, 127.0));
            word |= (bitcast<u32>(q) & 0xffu) << (8u * j);
        }
        store(from_v, row + b * 8u + w, word);
    }
    return f16_bits(bitcast<u32>(d));
}

@compute @workgroup_size(256)
fn kv_write_q8(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i >= params.n) {
        return;
    }
    let t = i / params.pairs;
    let p = i % params.pairs;
    let s = slot[t];
    if (s >= params.n_slots) {
        return;
    }
    let row = s * params.row_words;
    let second = 2u * p + 1u < params.kv_dim / 32u;
    for (var side = 0u; side < 2u; side++) {
        let from_v = side == 1u;
        var scales = block(from_v, t, 2u * p, row);
        if (second) {
            scales |= block(from_v, t, 2u * p + 1u, row) << 16u;
        }
        store(from_v, row + params.kv_dim / 4u + p, scales);
    }
}
