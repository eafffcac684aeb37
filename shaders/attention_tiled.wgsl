// attention_tiled  attention.wgsl's pass 1 for QT query tokens of one sequence at once: K/V rows are staged in
//                  workgroup memory and shared by the tile's queries; per query the same arithmetic, in the same order
// Layout           as attention.wgsl (q, k_cache, v_cache, seq, pos, table, part); all tokens share seq[0]'s table row
// Launch           grid (n_chunks, n_heads, ceil(n_tokens / QT)); 64 threads = QT queries × TPQ; hd ≤ 128
// Numerics         bit-identical to attention.wgsl: per 64-position tile a sequential fma score chain, the same
//                  64-lane pairwise tree for Σp, a sequential fma V sum; a query skips tiles past its own end

const WG: u32 = 64u;
const QT: u32 = 4u;
const TPQ: u32 = 16u;
const STAGE: u32 = 16u;
const HD_MAX: u32 = 128u;
const NEG: f32 = -3.4028235e38;

struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, scale: f32,
    block_size: u32, max_blocks: u32, chunk: u32, n_chunks: u32, n_tokens: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read> seq: array<u32>;
@group(0) @binding(5) var<storage, read> pos: array<u32>;
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read_write> part: array<f32>;

var<workgroup> qs: array<f32, 512>;    // [QT][HD_MAX]
var<workgroup> kv: array<f32, 2048>;   // [STAGE][HD_MAX]: K or V rows of 16 positions
var<workgroup> sc: array<f32, 256>;    // [QT][64]: scores, then probabilities
var<workgroup> red: array<f32, 256>;   // [QT][64]: the Σp tree
var<workgroup> slots: array<u32, WG>;

// Stage rows st·16 .. st·16+15 of the tile (K or V) into kv; rows at or past `end` are zero.
fn stage(from_v: bool, tile: u32, st: u32, end: u32, lane: u32, kv_stride: u32, kv_off: u32) {
    let hd = params.head_dim;
    for (var e = lane; e < STAGE * hd; e += WG) {
        let p = e / hd;
        let d = e % hd;
        let jj = st * STAGE + p;
        var v = 0.0;
        if (tile + jj < end) {
            let at = slots[jj] * kv_stride + kv_off + d;
            v = select(k_cache[at], v_cache[at], from_v);
        }
        kv[p * HD_MAX + d] = v;
    }
}

@compute @workgroup_size(WG)
fn attention_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd = params.head_dim;
    let h = wg.y;
    let c = wg.x;
    let t0 = wg.z * QT;
    let qi = lane / TPQ;
    let r = lane % TPQ;
    let valid = t0 + qi < params.n_tokens;
    let t = min(t0 + qi, params.n_tokens - 1u);
    let kv_off = (h / (params.n_heads / params.n_kv_heads)) * hd;
    let kv_stride = params.n_kv_heads * hd;
    let start = c * params.chunk;
    let end_q = select(start, min(start + params.chunk, pos[t] + 1u), valid);
    var end = start;
    for (var i = 0u; i < QT; i++) {
        if (t0 + i < params.n_tokens) {
            end = max(end, min(start + params.chunk, pos[t0 + i] + 1u));
        }
    }
    let row = seq[t0] * params.max_blocks;
    let qb = qi * HD_MAX;
    let sb = qi * WG;
    for (var d = r; d < hd; d += TPQ) {
        qs[qb + d] = q[(t * params.n_heads + h) * hd + d] * params.scale;
    }
    var m = NEG;
    var l = 0.0;
    var o = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (var tile = start; tile < end; tile += WG) {
        let j = tile + lane;
        var sl = 0u;
        if (j < end) {
            sl = table[row + j / params.block_size] * params.block_size + j % params.block_size;
        }
        slots[lane] = sl;
        workgroupBarrier();
        // Scores: thread r of query qi scores position st·16 + r of each stage.
        for (var st = 0u; st < WG / STAGE; st++) {
            stage(false, tile, st, end, lane, kv_stride, kv_off);
            workgroupBarrier();
            let jj = st * STAGE + r;
            var s = NEG;
            if (tile + jj < end_q) {
                var acc = 0.0;
                for (var d = 0u; d < hd; d++) {
                    acc = fma(qs[qb + d], kv[r * HD_MAX + d], acc);
                }
                s = acc;
            }
            sc[sb + jj] = s;
            workgroupBarrier();
        }
        var mx = NEG;
        for (var jj = 0u; jj < WG; jj++) {
            mx = max(mx, sc[sb + jj]);
        }
        let m_new = max(m, mx);
        workgroupBarrier();
        for (var k = 0u; k < WG / TPQ; k++) {
            let jj = r * (WG / TPQ) + k;
            let p = select(0.0, exp(sc[sb + jj] - m_new), tile + jj < end_q);
            sc[sb + jj] = p;
            red[sb + jj] = p;
        }
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            for (var i = r; i < s; i += TPQ) {
                red[sb + i] = red[sb + i] + red[sb + i + s];
            }
            workgroupBarrier();
        }
        let live = tile < end_q;
        let alpha = exp(m - m_new);
        if (live) {
            l = l * alpha + red[sb];
        }
        let n = select(0u, min(WG, end_q - tile), live);
        var acc: array<f32, 8>;
        for (var e = 0u; e < 8u; e++) {
            acc[e] = o[e] * alpha;
        }
        for (var st = 0u; st < WG / STAGE; st++) {
            stage(true, tile, st, end, lane, kv_stride, kv_off);
            workgroupBarrier();
            for (var p = 0u; p < STAGE; p++) {
                let jj = st * STAGE + p;
                if (jj < n) {
                    for (var e = 0u; e < 8u; e++) {
                        let d = r + e * TPQ;
                        if (d < hd) {
                            acc[e] = fma(sc[sb + jj], kv[p * HD_MAX + d], acc[e]);
                        }
                    }
                }
            }
            workgroupBarrier();
        }
        if (live) {
            m = m_new;
            o = acc;
        }
    }
    if (valid) {
        let base = ((t * params.n_heads + h) * params.n_chunks + c) * (hd + 2u);
        if (r == 0u) {
            part[base] = m;
            part[base + 1u] = l;
        }
        for (var e = 0u; e < 8u; e++) {
            let d = r + e * TPQ;
            if (d < hd) {
                part[base + 2u + d] = o[e];
            }
        }
    }
}
