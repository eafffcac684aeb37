// add_rms_norm_split  add_rms_norm with Variant::q8 spread over a row's workgroups: x[r, :] += y[r, :], dst[r, :] =
//                     rms_norm(x[r, :]) and dst's int8 blocks. Workgroup w writes dst and the blocks of the row's
//                     vec4s w·WG ..; the row's last workgroup to finish writes x, once every other one has read it
// Layout              x, y, dst: [n_rows, d] f32; gain: [d]; xq: q8_blocks' words for n_rows rows of d / 32 blocks;
//                     done: u32 [n_rows] counters, zero between dispatches (the last workgroup sets its row's back)
// Launch              grid (⌈d / 4 / WG⌉, n_rows); 256 threads; d a multiple of 32 and at most WG · MAXK
// Numerics            every workgroup sums the whole row as add_rms_norm.wgsl does (each lane's values in index order
//                     through one fma chain, then the same tree), so each gets its scale, and dst, the blocks and x
//                     are add_rms_norm's with norm_apply_q8's bits

const WG: u32 = 256u;
// Values of the row per lane: rows up to 8,192 wide.
const MAXK: u32 = 32u;

struct Params { d: u32, eps: f32, rows: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> gain: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;
@group(0) @binding(5) var<storage, read_write> xq: array<u32>;
@group(0) @binding(6) var<storage, read_write> done: array<atomic<u32>>;

var<workgroup> last: u32;

@compute @workgroup_size(WG)
fn add_rms_norm_split(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lane: u32) {
    let d = params.d;
    let row = wg.y;
    let start = row * d;
    // All of the lane's loads first (a constant trip count, so none waits on another), then the sums in order.
    var v: array<f32, MAXK>;
    for (var k = 0u; k < MAXK; k++) {
        let i = lane + k * WG;
        if (i < d) {
            v[k] = x[start + i] + y[start + i];
        }
    }
    var sum_sq = 0.0;
    for (var k = 0u; k < MAXK; k++) {
        if (lane + k * WG < d) {
            sum_sq = fma(v[k], v[k], sum_sq);
        }
    }
    let scale = row_scale(sum_sq, d, params.eps, lane);
    // This workgroup's vec4 of the row: x + y again (the sums the lanes above hold, in other lanes).
    let vecs = d / 4u;
    let j = wg.x * WG + lane;
    let inside = j < vecs;
    var o = vec4<f32>(0.0);
    if (inside) {
        let i = start + 4u * j;
        let a = vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]) + vec4<f32>(y[i], y[i + 1u], y[i + 2u], y[i + 3u]);
        let g = vec4<f32>(gain[4u * j], gain[4u * j + 1u], gain[4u * j + 2u], gain[4u * j + 3u]);
        o = a * scale * g;
        dst[i] = o.x;
        dst[i + 1u] = o.y;
        dst[i + 2u] = o.z;
        dst[i + 3u] = o.w;
    }
    store_q8(o, row * vecs + j, lane, params.rows * (d / 32u), inside);
    // Every read of x by this workgroup has returned (its values are in the sums and o above) before
    // it is counted; the last one counted writes x.
    workgroupBarrier();
    if (lane == 0u) {
        last = select(0u, 1u, atomicAdd(&done[row], 1u) == nwg.x - 1u);
    }
    if (workgroupUniformLoad(&last) == 1u) {
        for (var k = 0u; k < MAXK; k++) {
            let i = lane + k * WG;
            if (i < d) {
                x[start + i] = v[k];
            }
        }
        if (lane == 0u) {
            atomicStore(&done[row], 0u);
        }
    }
}
