// argmax    dst[r] = argmax_j x[r, j], lowest j on ties (NaN never wins)
// Layout    x: [rows, vocab] f32; dst: u32 [rows]
// Launch    one workgroup per row; 256 threads scan strided columns, then a tree of (value, index) pairs
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

@compute @workgroup_size(WG)
fn argmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let start = wg.x * params.vocab;
    var bv = -0x1.fffffep+127f;
    var bi = 0xffffffffu;
    for (var j = lane; j < params.vocab; j += WG) {
        let v = x[start + j];
        if (beats(v, j, bv, bi)) {
            bv = v;
            bi = j;
        }
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
