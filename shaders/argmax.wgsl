// argmax    dst[r] = argmax_j x[r, j], lowest j on ties (NaN never wins)
// Layout    x: [rows, vocab] f32; dst: u32 [rows]
// Launch    one workgroup per row; 256 threads scan strided columns (8 loads at a time), then a tree of
//           (value, index) pairs
// Numerics  exact comparisons

const WG: u32 = 256u;

struct Params { vocab: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether (v, i) beats (bv, bi): larger, or equal with a lower index.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

// The lane's best so far.
var<private> bv: f32;
var<private> bi: u32;

fn take(v: f32, j: u32) {
    if (beats(v, j, bv, bi)) {
        bv = v;
        bi = j;
    }
}

@compute @workgroup_size(WG)
fn argmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let start = wg.x * params.vocab;
    bv = -0x1.fffffep+127f;
    bi = 0xffffffffu;
    // Eight loads per lane before any compare: a loop of one load and one compare waits on every load in
    // turn, one memory latency per WG values (a 128k vocabulary is 500 of them). Named values, not an
    // array, which a compiler may keep in (slow) private memory.
    var j = lane;
    for (; j + 7u * WG < params.vocab; j += 8u * WG) {
        let at = start + j;
        let v0 = x[at];
        let v1 = x[at + WG];
        let v2 = x[at + 2u * WG];
        let v3 = x[at + 3u * WG];
        let v4 = x[at + 4u * WG];
        let v5 = x[at + 5u * WG];
        let v6 = x[at + 6u * WG];
        let v7 = x[at + 7u * WG];
        take(v0, j);
        take(v1, j + WG);
        take(v2, j + 2u * WG);
        take(v3, j + 3u * WG);
        take(v4, j + 4u * WG);
        take(v5, j + 5u * WG);
        take(v6, j + 6u * WG);
        take(v7, j + 7u * WG);
    }
    for (; j < params.vocab; j += WG) {
        take(x[start + j], j);
    }
    best_v[lane] = bv;
    best_i[lane] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lane < s && beats(best_v[lane + s], best_i[lane + s], best_v[lane], best_i[lane])) {
            best_v[lane] = best_v[lane + s];
            best_i[lane] = best_i[lane + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        dst[wg.x] = select(best_i[0], 0u, best_i[0] == 0xffffffffu);
    }
}
