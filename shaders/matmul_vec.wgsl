// matmul_vec  dst[i, j] = Σ_k x[i, k] · w[j, k] for one quantized weight part (the GEMV of gemv.wgsl)
// Layout      x: [m, k] f32 (or its int8 blocks, XT = vec4<u32>:
//             gemv_xq8.wgsl); w: the part's repacked blocks; dst: [m, ldd] f32, columns col0 .. col0 + n
// Launch      grid (ceil(n / (4·TEAMS)), ceil(m / MB)); WG threads
// Numerics    gemv.wgsl's

// n: the weight part's rows; it writes dst columns col0 .. col0 + n of rows ldd wide.
struct Params { info: WeightInfo, m: u32, n: u32, col0: u32, ldd: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> x: array<XT>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

fn wload(i: u32) -> vec4<u32> {
    return w[i];
}

fn xload(at: u32) -> XT {
    return x[at];
}

fn put(i: u32, v: f32) {
    dst[i] = v;
}

@compute @workgroup_size(WG)
fn matmul_vec(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    info = params.info;
    n_rows = params.n;
    m_rows = params.m;
    col0 = params.col0;
    ldd = params.ldd;
    gemv(wg.x, wg.y, lane);
}
