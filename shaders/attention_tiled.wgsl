// attention_tiled  attention for qt query tokens × the hpw heads of one GQA group at once, whole context, no split:
//                  each chunk's K/V rows are staged once and shared by all qt · hpw rows, folded into registers
// Layout           attention_chunk's inputs; dst: vec4 [n_tokens, n_heads · hd/4]. Tokens may come from any sequences
//                  in any order: a tile runs once per distinct sequence among its tokens (continuous batching)
// Launch           grid (ceil(n_tokens / qt), n_heads / hpw); 128 threads; qt · hpw ≤ 16 rows, rows · hd ≤ 2048
// Numerics         per row, attention.wgsl's chunk partials folded in the combine's order: bit-identical to split-K

// Workgroup memory ~27 KiB (qs 8 KiB, kv 16.5 KiB = 32 rows of hd 128, sc 2 KiB): the host runs this kernel
// only where the adapter allows it, else the (bit-identical) split-K path.
const WG: u32 = 128u;
const QH: u32 = 16u;
const QV: u32 = 512u;
const SV: u32 = 1056u;
const ITEMS: u32 = 4u; // QV / WG

@group(0) @binding(7) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn attention_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let hd4 = params.head_dim / 4u;
    let hpw = params.hpw;
    let t0 = wg.x * params.qt;
    let h0 = wg.y * hpw;
    let n_q = min(params.qt, params.n_tokens - t0);
    let rows = n_q * hpw; // row r: token t0 + r / hpw, head h0 + r % hpw
    for (var i = lane; i < rows * hd4; i += WG) {
        let r = i / hd4;
        qs[i] = q[((t0 + r / hpw) * params.n_heads + h0 + r % hpw) * hd4 + i % hd4] * params.scale;
    }
    let kv_col = (h0 / (params.n_heads / params.n_kv_heads)) * hd4;
    var runs: array<Run, ITEMS>;
    for (var k = 0u; k < ITEMS; k++) {
        runs[k] = run_start();
    }
    for (var i = 0u; i < n_q; i++) {
        let s = seq[t0 + i];
        if (seen_before(s, t0, i)) {
            continue;
        }
        let end = segment_end(s, t0, n_q);
        let lo = segment_start(s, t0, n_q);
        for (var c0 = lo / CHUNK * CHUNK; c0 < end; c0 += CHUNK) {
            if (lane < rows) {
                let t = t0 + lane / hpw;
                let j0 = first_key(pos[t], params.window);
                nk[lane] = select(0u, min(CHUNK, pos[t] + 1u - min(pos[t] + 1u, c0)), seq[t] == s);
                k0[lane] = select(0u, j0 - min(j0, c0), seq[t] == s);
            }
            chunk(c0, min(CHUNK, end - c0), lo, s * params.max_blocks, kv_col, rows, lane);
            fold_rows(&runs, s, t0, c0, rows, lane);
        }
    }
    for (var k = 0u; k < ITEMS; k++) {
        let i = lane + k * WG;
        let r = i / hd4;
        if (r < rows) {
            dst[((t0 + r / hpw) * params.n_heads + h0 + r % hpw) * hd4 + i % hd4] = finish(runs[k]);
        }
    }
}

// Whether an earlier token of the tile belongs to sequence s (its segment already ran).
fn seen_before(s: u32, t0: u32, i: u32) -> bool {
    var seen = false;
    for (var j = 0u; j < i; j++) {
        seen = seen || seq[t0 + j] == s;
    }
    return seen;
}

// The first key the segment of sequence s needs: the smallest first_key of its rows.
fn segment_start(s: u32, t0: u32, n_q: u32) -> u32 {
    var lo = 0xffffffffu;
    for (var j = 0u; j < n_q; j++) {
        if (seq[t0 + j] == s) {
            lo = min(lo, first_key(pos[t0 + j], params.window));
        }
    }
    return lo;
}

// Keys the segment of sequence s needs: its furthest query position + 1.
fn segment_end(s: u32, t0: u32, n_q: u32) -> u32 {
    var end = 0u;
    for (var j = 0u; j < n_q; j++) {
        if (seq[t0 + j] == s) {
            end = max(end, pos[t0 + j] + 1u);
        }
    }
    return end;
}

// Folds the chunk at c0 into each item's run, for the rows of sequence s that have keys there (the chunks the
// combine would fold for that token: none past its position or wholly before its window). Reads storage, not
// nk: the next chunk may be rewriting nk.
fn fold_rows(runs: ptr<function, array<Run, ITEMS>>, s: u32, t0: u32, c0: u32, rows: u32, lane: u32) {
    let hd4 = params.head_dim / 4u;
    for (var k = 0u; k < ITEMS; k++) {
        let r = (lane + k * WG) / hd4;
        if (r < rows) {
            let t = t0 + r / params.hpw;
            if (seq[t] == s && pos[t] >= c0 && c0 + CHUNK > first_key(pos[t], params.window)) {
                (*runs)[k] = fold((*runs)[k], mx[r], lc[k], oc[k]);
            }
        }
    }
}
