// rms_norm  dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout    x, dst: [n_rows, d] row-major f32; gain: [d]; params.rows = n_rows (read by norm_apply_q8 only)
// Launch    one workgroup per row; 256 threads stride along the row
// Numerics  per lane an fma chain over its values in index order (loaded four at a time), then tree-reduced in
//           workgroup memory

const WG: u32 = 256u;

struct Params { d: u32, eps: f32, rows: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gain: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let start = wg.x * params.d;
    // Four strided values per step, loaded before any is used (a loop of one load each waited on each
    // in turn); the fma chain keeps the index order.
    var sum_sq = 0.0;
    var i = lane;
    for (; i + 3u * WG < params.d; i += 4u * WG) {
        let v = vec4<f32>(x[start + i], x[start + i + WG], x[start + i + 2u * WG], x[start + i + 3u * WG]);
        sum_sq = fma(v.w, v.w, fma(v.z, v.z, fma(v.y, v.y, fma(v.x, v.x, sum_sq))));
    }
    for (; i < params.d; i += WG) {
        let v = x[start + i];
        sum_sq = fma(v, v, sum_sq);
    }
    let scale = row_scale(sum_sq, params.d, params.eps, lane);
    apply_norm(start, scale, lane);
}
