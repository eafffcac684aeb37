// to_f16    x's rows as f16 values, for matmul_coop16: converted once per matmul call instead of once per output tile
// Layout    x: [m, k] f32; dst: [m_pad, k] f16 row-major, viewed as vec4<f16>; rows past m are zeros (the GEMM's tile
//           padding)
// Launch    one thread per 4 values, m_pad · k / 4 threads; 256-thread groups over a 2D grid
// Numerics  rounded to f16 (as matmul_coop's slabs)

struct Params { k: u32, m: u32, m_pad: u32, pad: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f16>>;

@compute @workgroup_size(256)
fn to_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lane: u32) {
    let u = (wg.x + wg.y * nwg.x) * 256u + lane;
    let k4 = params.k / 4u;
    if (u >= params.m_pad * k4) {
        return;
    }
    dst[u] = select(vec4<f16>(), vec4<f16>(x[min(u, params.m * k4 - 1u)]), u / k4 < params.m);
}
