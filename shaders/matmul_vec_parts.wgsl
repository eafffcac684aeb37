// matmul_vec_parts  dst_p = x · w_pᵀ for PARTS (2 or 3) quantized weights of one format sharing x (q, k, v; gate, up)
// Layout            x: [m, k] f32 (or its int8 blocks, XT = vec4<u32>:
//                   gemv_xq8.wgsl); w0..w2: whole weights (one part each); d0..d2: [m, n_p] f32 (PARTS = 2: w2, d2 unused)
// Launch            one grid: part 0's workgroups (gemv.wgsl's grid for it), then part 1's from start.x, part 2's from start.y
// Numerics          gemv.wgsl's for each part: bit for bit the separate matmul_vec dispatches

// n: (n_0, n_1, n_2, m); start: first workgroup of parts 1 and 2.
struct Params { info0: WeightInfo, info1: WeightInfo, info2: WeightInfo, n: vec4<u32>, start: vec4<u32> }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w0: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> w1: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> w2: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> x: array<XT>;
@group(0) @binding(5) var<storage, read_write> d0: array<f32>;
@group(0) @binding(6) var<storage, read_write> d1: array<f32>;
@group(0) @binding(7) var<storage, read_write> d2: array<f32>;

// The workgroup's part: the same for all its lanes, so the branches below never diverge.
var<private> part: u32;

fn wload(i: u32) -> vec4<u32> {
    switch part {
        case 1u: { return w1[i]; }
        case 2u: { return w2[i]; }
        default: { return w0[i]; }
    }
}

fn xload(at: u32) -> XT {
    return x[at];
}

fn put(i: u32, v: f32) {
    switch part {
        case 1u: { d1[i] = v; }
        case 2u: { d2[i] = v; }
        default: { d0[i] = v; }
    }
}

@compute @workgroup_size(WG)
fn matmul_vec_parts(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    var gx = wg.x;
    part = 0u;
    info = params.info0;
    if (PARTS > 2u && gx >= params.start.y) {
        part = 2u;
        gx -= params.start.y;
        info = params.info2;
    } else if (gx >= params.start.x) {
        part = 1u;
        gx -= params.start.x;
        info = params.info1;
    }
    n_rows = params.n[part];
    m_rows = params.n.w;
    col0 = 0u;
    ldd = n_rows;
    gemv(gx, wg.y, lane);
}
