// attention  split-K decoding, pass 1: for token t, the hpw heads h0.. of one GQA group (sharing K/V head
//            h0 / group) and chunk c of positions [max(c·CHUNK, j0), min((c+1)·CHUNK, pos[t] + 1)): (m, l, o) per head,
//            j0 = first_key(pos[t], window)
// Layout     attention_chunk's inputs; part: vec4 [n_tokens, n_heads, n_chunks, hd/4 + 1] = ((m, l, 0, 0), o[hd/4])
// Launch     grid (n_chunks, n_heads / hpw, n_tokens); 64 threads; chunks past pos[t] or wholly before j0 return at
//            once (never read)
// Numerics   attention_chunk's; attention_combine folds the chunks exactly as attention_tiled does in registers

// Workgroup memory: qs 4 KiB (hpw · hd ≤ 1024), kv 8.5 KiB (16 rows of hd 128 per stage), ~1.2 KiB more:
// inside WebGPU's default 16 KiB, so this kernel runs on every adapter.
const WG: u32 = 64u;
const QH: u32 = 8u;
const QV: u32 = 256u;
const SV: u32 = 544u;
const ITEMS: u32 = 4u; // QV / WG: rows · hd/4 ≤ QV

@group(0) @binding(7) var<storage, read_write> part: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd4 = params.head_dim / 4u;
    let c = wg.x;
    let t = wg.z;
    let h0 = wg.y * params.hpw;
    let rows = params.hpw;
    let c0 = c * CHUNK;
    let lo = first_key(pos[t], params.window);
    if (c0 > pos[t] || c0 + CHUNK <= lo) {
        return;
    }
    let n = min(CHUNK, pos[t] + 1u - c0);
    // The group's heads are consecutive in q: one contiguous run of rows · hd/4 vec4s.
    for (var i = lane; i < rows * hd4; i += WG) {
        qs[i] = q[(t * params.n_heads + h0) * hd4 + i] * params.scale;
    }
    if (lane < rows) {
        nk[lane] = n;
        k0[lane] = lo - min(lo, c0);
    }
    let kv_col = (h0 / (params.n_heads / params.n_kv_heads)) * hd4;
    chunk(c0, n, lo, seq[t] * params.max_blocks, kv_col, rows, lane);
    for (var k = 0u; k < ITEMS; k++) {
        let i = lane + k * WG;
        let r = i / hd4;
        let col = i % hd4;
        if (r < rows) {
            let base = ((t * params.n_heads + h0 + r) * params.n_chunks + c) * (hd4 + 1u);
            part[base + 1u + col] = oc[k];
            if (col == 0u) {
                part[base] = vec4<f32>(mx[r], lc[k], 0.0, 0.0);
            }
        }
    }
}
