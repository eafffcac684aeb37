// attention_chunk  one chunk of ≤ CHUNK key positions for a workgroup's query rows (shared by attention and
//                  attention_tiled): row r sees keys k0[r] ≤ j < nk[r]: m = max s_j, p_j = e^(s_j - m), l = Σ p_j,
//                  o = Σ p_j V_j (k0 > 0 only at a sliding window's edge; positions below the caller's lo are not staged)
// Layout           qs: [rows, hd/4] q · scale (the caller fills it); kv: [R, hd/4 + 1] staged K or V rows; sc: [rows, CHUNK]
// Launch           called by all WG threads of the workgroup in uniform control flow; the caller defines WG, QH, QV, SV, ITEMS
// Numerics         f32. s_j = a vec4 fma chain over the head dim, then (x + y) + (z + w); l, o summed over j in order.
//                  Nothing depends on the staging split or the other rows, so every caller gets the same bits per row

struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, scale: f32,
    block_size: u32, max_blocks: u32, n_tokens: u32, hpw: u32,
    qt: u32, n_chunks: u32, window: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
// Bindings 2 and 3, k_cache and v_cache, and their kv_load come from kv_f32.wgsl, kv_f16.wgsl or kv_q8.wgsl.
@group(0) @binding(4) var<storage, read> seq: array<u32>;
@group(0) @binding(5) var<storage, read> pos: array<u32>;
@group(0) @binding(6) var<storage, read> table: array<u32>;

var<workgroup> qs: array<vec4<f32>, QV>;
// The +1 vec4 of padding per row puts the rows that neighbouring threads read in different banks.
var<workgroup> kv: array<vec4<f32>, SV>;
var<workgroup> sc: array<f32, QH * CHUNK>; // scores, then probabilities
var<workgroup> mx: array<f32, QH>;         // per row: the chunk's max score
var<workgroup> nk: array<u32, QH>;         // per row: end of the keys of this chunk it sees (the caller sets it)
var<workgroup> k0: array<u32, QH>;         // per row: first key of this chunk it sees (the caller sets it)
var<workgroup> slots: array<u32, CHUNK>;

// Per thread, item k = lane + k·WG is (row k / hd4, vec4 column k % hd4): its chunk o and l.
var<private> oc: array<vec4<f32>, ITEMS>;
var<private> lc: array<f32, ITEMS>;

// K (or V) rows [st, st + n) of the chunk into kv: consecutive threads load consecutive vec4s of a row.
fn stage(from_v: bool, st: u32, n: u32, kv_col: u32, lane: u32) {
    let hd4 = params.head_dim / 4u;
    for (var i = lane; i < n * hd4; i += WG) {
        let jj = i / hd4;
        let c = i % hd4;
        kv[jj * (hd4 + 1u) + c] = kv_load(from_v, slots[st + jj], kv_col + c);
    }
}

// q·scale of row r against staged key jj: four independent fma chains (latency), then a fixed pairing.
fn score(r: u32, jj: u32, hd4: u32) -> f32 {
    var a = vec4<f32>(0.0);
    for (var c = 0u; c < hd4; c++) {
        a = fma(qs[r * hd4 + c], kv[jj * (hd4 + 1u) + c], a);
    }
    return (a.x + a.y) + (a.z + a.w);
}

// Positions [c0, c0 + n_max) of block-table row `row` (n_max ≥ every nk[r]); leaves mx and, per item, oc and lc.
// Positions below lo (before every row's window) are not looked up in the table: slot 0 stands in, never used.
fn chunk(c0: u32, n_max: u32, lo: u32, row: u32, kv_col: u32, rows: u32, lane: u32) {
    let hd4 = params.head_dim / 4u;
    let per_stage = min(CHUNK, SV / (hd4 + 1u));
    if (lane < n_max) {
        let j = c0 + lane;
        slots[lane] = select(0u, table[row + j / params.block_size] * params.block_size + j % params.block_size, j >= lo);
    }
    workgroupBarrier();
    for (var st = 0u; st < n_max; st += per_stage) {
        let n = min(per_stage, n_max - st);
        stage(false, st, n, kv_col, lane);
        workgroupBarrier();
        for (var i = lane; i < rows * n; i += WG) {
            let r = i / n;
            let jj = i % n;
            if (st + jj < nk[r] && st + jj >= k0[r]) {
                sc[r * CHUNK + st + jj] = score(r, jj, hd4);
            }
        }
        workgroupBarrier();
    }
    if (lane < rows) {
        var m = NEG;
        for (var j = k0[lane]; j < nk[lane]; j++) {
            m = max(m, sc[lane * CHUNK + j]);
        }
        mx[lane] = m;
    }
    workgroupBarrier();
    for (var i = lane; i < rows * CHUNK; i += WG) {
        let r = i / CHUNK;
        if (i % CHUNK < nk[r] && i % CHUNK >= k0[r]) {
            sc[i] = exp(sc[i] - mx[r]);
        }
    }
    for (var k = 0u; k < ITEMS; k++) {
        oc[k] = vec4<f32>(0.0);
        lc[k] = 0.0;
    }
    for (var st = 0u; st < n_max; st += per_stage) {
        let n = min(per_stage, n_max - st);
        workgroupBarrier(); // the probabilities are written; the previous stage is consumed
        stage(true, st, n, kv_col, lane);
        workgroupBarrier();
        accumulate(st, n, rows, lane);
    }
    workgroupBarrier(); // the caller may rewrite nk and qs now
}

// o += p_j · V_j and l += p_j over the staged rows each item's row sees, in position order.
fn accumulate(st: u32, n: u32, rows: u32, lane: u32) {
    let hd4 = params.head_dim / 4u;
    for (var k = 0u; k < ITEMS; k++) {
        let i = lane + k * WG;
        let r = i / hd4;
        if (r < rows) {
            let c = i % hd4;
            let end = min(n, nk[r] - min(nk[r], st));
            var o = oc[k];
            var l = lc[k];
            for (var jj = min(n, k0[r] - min(k0[r], st)); jj < end; jj++) {
                let p = sc[r * CHUNK + st + jj];
                o = fma(vec4<f32>(p), kv[jj * (hd4 + 1u) + c], o);
                l += p;
            }
            oc[k] = o;
            lc[k] = l;
        }
    }
}
