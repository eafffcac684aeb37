// norm_scale  the RMSNorm kernels' row scale 1 / sqrt(mean(v²) + eps), from each lane's sum of squares of its values
// Layout      workgroup memory `partial` (WG values; the joining kernel defines WG)
// Launch      none (joined into rms_norm, add_rms_norm, add_rms_norm_split and rms_norm_rope): called by every lane
//             of the row's workgroup in uniform control flow (barriers)
// Numerics    a tree over the WG lanes in workgroup memory, halving each step: one order for every kernel that joins it

var<workgroup> partial: array<f32, WG>;

fn row_scale(sum_sq: f32, d: u32, eps: f32, lane: u32) -> f32 {
    partial[lane] = sum_sq;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            partial[lane] += partial[lane + s];
        }
        workgroupBarrier();
    }
    return 1.0 / sqrt(partial[0] / f32(d) + eps);
}
