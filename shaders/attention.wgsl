// attention  split-K flash decoding, pass 1: for token t, head h and chunk c of positions
//            [c·chunk, min((c+1)·chunk, pos[t]+1)): m = max score, l = Σ exp(s - m), o = Σ exp(s - m) · V
//            with s_j = scale · q[t, h] · K[slot(j), h / group] and slot(j) read through the block table
// Layout     q: [n_tokens, n_heads · hd]; k_cache, v_cache: [n_slots, n_kv_heads · hd]; seq, pos: u32 [n_tokens];
//            table: u32 [n_seqs, max_blocks]; part: [n_tokens, n_heads, n_chunks, hd + 2] = (m, l, o[hd])
// Launch     grid (n_chunks, n_heads, n_tokens); 64 threads: one key each per tile of 64 positions, then
//            one output dimension each (hd ≤ 256) for the V sum
// Numerics   f32 online softmax (running max rescaling); empty chunks write m = -3.4e38, l = 0, o = 0

const WG: u32 = 64u;
const NEG: f32 = -3.4028235e38;

struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, scale: f32,
    block_size: u32, max_blocks: u32, chunk: u32, n_chunks: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read> seq: array<u32>;
@group(0) @binding(5) var<storage, read> pos: array<u32>;
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read_write> part: array<f32>;

var<workgroup> qs: array<f32, 256>;
var<workgroup> probs: array<f32, WG>;
var<workgroup> slots: array<u32, WG>;
var<workgroup> red: array<f32, WG>;

fn reduce(v: f32, lane: u32, is_max: bool) -> f32 {
    red[lane] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lane] = select(red[lane] + red[lane + s], max(red[lane], red[lane + s]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd = params.head_dim;
    let t = wg.z;
    let h = wg.y;
    let c = wg.x;
    let kv_off = (h / (params.n_heads / params.n_kv_heads)) * hd;
    let kv_stride = params.n_kv_heads * hd;
    let start = c * params.chunk;
    let end = min(start + params.chunk, pos[t] + 1u);
    let row = seq[t] * params.max_blocks;
    for (var d = lane; d < hd; d += WG) {
        qs[d] = q[(t * params.n_heads + h) * hd + d] * params.scale;
    }
    workgroupBarrier();
    var m = NEG;
    var l = 0.0;
    var o = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var tile = start; tile < end; tile += WG) {
        let j = tile + lane;
        var s = NEG;
        var sl = 0u;
        if (j < end) {
            sl = table[row + j / params.block_size] * params.block_size + j % params.block_size;
            let kb = sl * kv_stride + kv_off;
            var acc = 0.0;
            for (var d = 0u; d < hd; d++) {
                acc = fma(qs[d], k_cache[kb + d], acc);
            }
            s = acc;
        }
        slots[lane] = sl;
        let m_new = max(m, reduce(s, lane, true));
        let p = select(0.0, exp(s - m_new), j < end);
        probs[lane] = p;
        let alpha = exp(m - m_new);
        l = l * alpha + reduce(p, lane, false);
        let n = min(WG, end - tile);
        for (var e = 0u; e < 4u; e++) {
            let d = lane + e * WG;
            if (d < hd) {
                var acc = o[e] * alpha;
                for (var jj = 0u; jj < n; jj++) {
                    acc = fma(probs[jj], v_cache[slots[jj] * kv_stride + kv_off + d], acc);
                }
                o[e] = acc;
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    let base = ((t * params.n_heads + h) * params.n_chunks + c) * (hd + 2u);
    if (lane == 0u) {
        part[base] = m;
        part[base + 1u] = l;
    }
    for (var e = 0u; e < 4u; e++) {
        let d = lane + e * WG;
        if (d < hd) {
            part[base + 2u + d] = o[e];
        }
    }
}
