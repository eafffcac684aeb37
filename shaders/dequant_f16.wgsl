// dequant_f16  rows row0 .. row0 + rows of a quantized weight as f16 values, for matmul_coop16: a weight decoded once
//              per matmul call instead of once per output tile
// Layout       w: the weight (one part), read by the joined decode_*.wgsl; dst: [rows_pad, k] f16 row-major, viewed as
//              vec4<f16> (matmul_coop16 reads it as f16 values); rows past `rows` are zeros (the GEMM's tile padding)
// Launch       one thread per 8 values of a row, rows_pad · k / 8 threads; 256-thread groups over a 2D grid
// Numerics     the decoder's f32 values rounded to f16 (as matmul_coop's slabs)

struct Params { info: WeightInfo, row0: u32, rows: u32, rows_pad: u32, pad: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f16>>;

@compute @workgroup_size(256)
fn dequant_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let u = (wg.x + wg.y * nwg.x) * 256u + lane;
    let groups = params.info.k / 8u;
    let r = u / groups;
    if (r >= params.rows_pad) {
        return;
    }
    var v = Vals8(vec4<f32>(), vec4<f32>());
    if (r < params.rows) {
        v = decode8(params.info, params.row0 + r, u % groups);
    }
    dst[2u * u] = vec4<f16>(v.a);
    dst[2u * u + 1u] = vec4<f16>(v.b);
}
