// reduce_subgroup  row_sum: the sum of `v` over each run of TPR consecutive invocations (one output row)
// Layout           registers; requires TPR / SPLIT == the adapter's (fixed) subgroup size. row_sum4 with SPLIT > 1
//                  (a team of SPLIT subgroups) passes the subgroups' sums through workgroup memory
// Launch           called by every invocation of the workgroup (row_sum4 with SPLIT > 1: in uniform control flow)
// Numerics         f32, the hardware's subgroup reduction order (fixed per device); then the team's subgroup
//                  sums added in subgroup order

fn row_sum(v: f32, lane: u32) -> f32 {
    return subgroupAdd(v);
}

// Each subgroup's sums, for teams of SPLIT subgroups.
var<workgroup> subgroup_sums: array<vec4<f32>, WG * SPLIT / TPR>;

// row_sum4: row_sum of each component of a vec4 (four output rows at once).
fn row_sum4(v: vec4<f32>, lane: u32) -> vec4<f32> {
    let s = subgroupAdd(v);
    if (SPLIT == 1u) {
        return s;
    }
    let sg = TPR / SPLIT;
    if (lane % sg == 0u) {
        subgroup_sums[lane / sg] = s;
    }
    workgroupBarrier();
    let first = (lane - lane % TPR) / sg;
    var total = subgroup_sums[first];
    for (var j = 1u; j < SPLIT; j++) {
        total += subgroup_sums[first + j];
    }
    workgroupBarrier(); // subgroup_sums is reused by the next call
    return total;
}
