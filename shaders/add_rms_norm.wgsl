// add_rms_norm  x[r, :] += y[r, :], then dst[r, :] = x[r, :] · gain / sqrt(mean(x[r, :]²) + eps)
// Layout        x, y, dst: [n_rows, d] row-major f32; gain: [d]; params.rows = n_rows (read by norm_apply_q8 only)
// Launch        one workgroup per row; 256 threads stride along the row (rms_norm.wgsl's grid)
// Numerics      the sum is add_assign's f32 add, the norm rms_norm.wgsl's arithmetic on it, step for
//               step: the bits of add_assign then rms_norm, in one dispatch instead of two

const WG: u32 = 256u;

struct Params { d: u32, eps: f32, rows: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> gain: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn add_rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let start = wg.x * params.d;
    // Four strided values per step, all loaded before the first store (a loop of one load and one store
    // waited on each load in turn: x is read and written); the fma chain keeps the index order.
    var sum_sq = 0.0;
    var i = lane;
    for (; i + 3u * WG < params.d; i += 4u * WG) {
        let a = vec4<f32>(x[start + i], x[start + i + WG], x[start + i + 2u * WG], x[start + i + 3u * WG]);
        let b = vec4<f32>(y[start + i], y[start + i + WG], y[start + i + 2u * WG], y[start + i + 3u * WG]);
        let v = a + b;
        x[start + i] = v.x;
        x[start + i + WG] = v.y;
        x[start + i + 2u * WG] = v.z;
        x[start + i + 3u * WG] = v.w;
        sum_sq = fma(v.w, v.w, fma(v.z, v.z, fma(v.y, v.y, fma(v.x, v.x, sum_sq))));
    }
    for (; i < params.d; i += WG) {
        let v = x[start + i] + y[start + i];
        x[start + i] = v;
        sum_sq = fma(v, v, sum_sq);
    }
    let scale = row_scale(sum_sq, params.d, params.eps, lane);
    // Each lane reads back only the elements it wrote above: no barrier needed.
    apply_norm(start, scale, lane);
}
