// reduce_shared  row_sum: the sum of `v` over each run of TPR consecutive invocations (one output row)
// Layout         red: [WG] f32 in workgroup memory
// Launch         called by every invocation of a WG-wide workgroup, in uniform control flow (reusable)
// Numerics       f32 pairwise tree (fixed order: the same row always sums the same way)

var<workgroup> red: array<f32, WG>;

fn row_sum(v: f32, lane: u32) -> f32 {
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
