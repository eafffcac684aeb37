// reduce_shared  row_sum: the sum of `v` over each run of TPR consecutive invocations (one output row)
// Layout         red: [WG] f32 in workgroup memory
// Launch         called by every invocation of a WG-wide workgroup, in uniform control flow (reusable)
// Numerics       f32 pairwise tree (fixed order: the same row always sums the same way)

var<workgroup> red: array<f32, WG>;

fn row_sum(v: f32, lane: u32) -> f32 {
    if (TPR == 1u) {
        return v; // a team of one: no barrier (CPU adapters, where barriers are dear)
    }
    red[lane] = v;
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane % TPR < s) {
            red[lane] += red[lane + s];
        }
        workgroupBarrier();
    }
    let total = red[lane - lane % TPR];
    workgroupBarrier(); // red is reused by the next call
    return total;
}

// row_sum4: row_sum of each component of a vec4 (four output rows at once), same tree.
var<workgroup> red4: array<vec4<f32>, WG>;

fn row_sum4(v: vec4<f32>, lane: u32) -> vec4<f32> {
    if (TPR == 1u) {
        return v;
    }
    red4[lane] = v;
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane % TPR < s) {
            red4[lane] += red4[lane + s];
        }
        workgroupBarrier();
    }
    let total = red4[lane - lane % TPR];
    workgroupBarrier();
    return total;
}
