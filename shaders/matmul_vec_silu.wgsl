// matmul_vec_silu  hidden = silu(gate) · up, dst = hidden · wᵀ in one dispatch: the GEMV of gemv.wgsl reading x as
//                  silu_mul.wgsl's values, computed where they are loaded (the feed-forward block's down projection)
// Layout           gate, up, hidden: [m, k] f32; w: one quantized weight part; dst: [m, ldd] f32, columns col0 .. col0 + n
// Launch           gemv.wgsl's grid; workgroup column 0 also writes hidden: its first team (which loads every block of its
//                  x rows), or with STAGE_X all its lanes (which stage each value once)
// Numerics         silu_mul.wgsl's expression per value, then gemv.wgsl's sums: bit for bit the two dispatches

struct Params { info: WeightInfo, m: u32, n: u32, col0: u32, ldd: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> hidden: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> dst: array<f32>;

var<private> writes_hidden: bool;

fn wload(i: u32) -> vec4<u32> {
    return w[i];
}

fn silu_times(g: f32, u: f32) -> f32 {
    return g / (1.0 + exp(-g)) * u;
}

fn xload(at: u32) -> vec4<f32> {
    let g = gate[at];
    let u = up[at];
    let h = vec4<f32>(silu_times(g.x, u.x), silu_times(g.y, u.y), silu_times(g.z, u.z), silu_times(g.w, u.w));
    if (writes_hidden) {
        hidden[at] = h;
    }
    return h;
}

fn put(i: u32, v: f32) {
    dst[i] = v;
}

@compute @workgroup_size(WG)
fn matmul_vec_silu(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    info = params.info;
    n_rows = params.n;
    m_rows = params.m;
    col0 = params.col0;
    ldd = params.ldd;
    // Staged, the workgroup's lanes load each x value once between them; else the first team loads them all.
    writes_hidden = wg.x == 0u && (STAGE_X || lane / TPR == 0u);
    gemv(wg.x, wg.y, lane);
}
