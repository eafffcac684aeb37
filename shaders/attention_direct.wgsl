// attention_direct  split-K decoding, pass 1, with K and V read straight from storage into registers: attention.wgsl's
//                   partials ((m, l) and o per head and chunk) for token t, the QH heads h0.. of one GQA group and
//                   chunk c, in two memory round trips (q and the slots; then every K and V load of the chunk at once)
// Layout            attention.wgsl's: attention_chunk's Params and bindings 1–6, part at binding 7
// Launch            grid (n_chunks, n_heads / QH, n_tokens); 128 threads. The host defines QH (≤ 4, = params.hpw) and
//                   HD4 = head_dim / 4, a multiple of 4 (≤ 64). Scores: thread i takes key i / 4 and the vec4 columns
//                   ≡ i % 4 (mod 4) of it. Outputs: thread i takes column i % HD4 and the keys ≡ i / HD4 (mod G)
// Numerics          f32. A score is four vec4 fma chains over interleaved columns, each (x + y) + (z + w), added as
//                   (a0 + a1) + (a2 + a3); o sums the keys of each of G groups in order, then the groups in order.
//                   Not attention_chunk's order, so not the tiled kernel's bits: the host uses it only where batch
//                   invariance is not promised

struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, scale: f32,
    block_size: u32, max_blocks: u32, n_tokens: u32, hpw: u32,
    qt: u32, n_chunks: u32, window: u32,
}

const WG: u32 = 128u;
// Columns of a key one score thread loads; key groups of the output threads and the keys of each.
const KQ: u32 = HD4 / 4u;
const G: u32 = WG / HD4;
const KG: u32 = (CHUNK + G - 1u) / G;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
// Bindings 2 and 3, k_cache and v_cache, and their kv_load come from kv_f32.wgsl, kv_f16.wgsl or kv_q8.wgsl.
@group(0) @binding(4) var<storage, read> seq: array<u32>;
@group(0) @binding(5) var<storage, read> pos: array<u32>;
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read_write> part: array<vec4<f32>>;

var<workgroup> qs: array<vec4<f32>, QH * HD4>;
var<workgroup> slots: array<u32, CHUNK>;
var<workgroup> dots: array<f32, QH * CHUNK * 4u>; // per (head, key): the four column classes' partial scores
var<workgroup> probs: array<f32, QH * CHUNK>;     // per (head, key): the score, then e^(s - m) (0 if not seen)
var<workgroup> maxes: array<f32, QH>;
var<workgroup> outs: array<vec4<f32>, G * QH * HD4>; // per (key group, head, column): Σ p · V

@compute @workgroup_size(WG)
fn attention_direct(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let c = wg.x;
    let t = wg.z;
    let h0 = wg.y * QH;
    let c0 = c * CHUNK;
    let lo = first_key(pos[t], params.window);
    if (c0 > pos[t] || c0 + CHUNK <= lo) {
        return;
    }
    // Keys k0 ≤ j < n of the chunk are seen; the others read slot 0 (a real row, maybe NaN in a window's
    // dropped blocks) and are masked with select, never multiplied.
    let n = min(CHUNK, pos[t] + 1u - c0);
    let k0 = lo - min(lo, c0);
    for (var i = lane; i < QH * HD4; i += WG) {
        qs[i] = q[(t * params.n_heads + h0) * HD4 + i] * params.scale;
    }
    if (lane < CHUNK) {
        var slot = 0u;
        if (lane >= k0 && lane < n) {
            let p = c0 + lane;
            slot = table[seq[t] * params.max_blocks + p / params.block_size] * params.block_size + p % params.block_size;
        }
        slots[lane] = slot;
    }
    workgroupBarrier();
    let kv_col = (h0 / (params.n_heads / params.n_kv_heads)) * HD4;
    // Every load of the chunk is issued here, V's before K's arithmetic: one round trip for both.
    let key = lane / 4u;
    let u = lane % 4u;
    var kr: array<vec4<f32>, KQ>;
    for (var k = 0u; k < KQ; k++) {
        kr[k] = kv_load(false, slots[key], kv_col + u + 4u * k);
    }
    let col = lane % HD4;
    let grp = lane / HD4;
    var vr: array<vec4<f32>, KG>;
    for (var k = 0u; k < KG; k++) {
        let j = min(grp + G * k, CHUNK - 1u);
        vr[k] = kv_load(true, slots[j], kv_col + col);
    }
    for (var r = 0u; r < QH; r++) {
        var a = vec4<f32>(0.0);
        for (var k = 0u; k < KQ; k++) {
            a = fma(qs[r * HD4 + u + 4u * k], kr[k], a);
        }
        dots[(r * CHUNK + key) * 4u + u] = (a.x + a.y) + (a.z + a.w);
    }
    workgroupBarrier();
    // QH ≤ 4, so lane i is at most one (head, key) pair: head i / CHUNK, key i % CHUNK.
    let pair = lane < QH * CHUNK;
    let head = lane / CHUNK;
    let jk = lane % CHUNK;
    let seen = jk >= k0 && jk < n;
    if (pair) {
        let s = (dots[4u * lane] + dots[4u * lane + 1u]) + (dots[4u * lane + 2u] + dots[4u * lane + 3u]);
        probs[lane] = select(NEG, s, seen);
    }
    workgroupBarrier();
    // Each pair's thread finds its head's max itself (the same sequence of reads, so the same value).
    var prob = 0.0;
    if (pair) {
        var m = NEG;
        for (var j = k0; j < n; j++) {
            m = max(m, probs[head * CHUNK + j]);
        }
        prob = select(0.0, exp(probs[lane] - m), seen);
        if (jk == 0u) {
            maxes[head] = m;
        }
    }
    workgroupBarrier();
    if (pair) {
        probs[lane] = prob;
    }
    workgroupBarrier();
    if (grp < G) {
        for (var r = 0u; r < QH; r++) {
            var o = vec4<f32>(0.0);
            for (var k = 0u; k < KG; k++) {
                let j = grp + G * k;
                if (j < CHUNK) {
                    let p = probs[r * CHUNK + j];
                    o = select(o, fma(vec4<f32>(p), vr[k], o), j >= k0 && j < n);
                }
            }
            outs[(grp * QH + r) * HD4 + col] = o;
        }
    }
    workgroupBarrier();
    for (var i = lane; i < QH * HD4; i += WG) {
        let r = i / HD4;
        let cc = i % HD4;
        var o = vec4<f32>(0.0);
        for (var g = 0u; g < G; g++) {
            o += outs[(g * QH + r) * HD4 + cc];
        }
        let base = ((t * params.n_heads + h0 + r) * params.n_chunks + c) * (HD4 + 1u);
        part[base + 1u + cc] = o;
        if (cc == 0u) {
            var l = 0.0;
            for (var j = k0; j < n; j++) {
                l += probs[r * CHUNK + j];
            }
            part[base] = vec4<f32>(maxes[r], l, 0.0, 0.0);
        }
    }
}
