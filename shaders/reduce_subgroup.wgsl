// reduce_subgroup  row_sum: the sum of `v` over each run of TPR consecutive invocations (one output row)
// Layout           registers only; requires TPR == the adapter's (fixed) subgroup size
// Launch           called by every invocation of the workgroup
// Numerics         f32, the hardware's subgroup reduction order (fixed per device)

fn row_sum(v: f32, lane: u32) -> f32 {
    return subgroupAdd(v);
}
