// silu_mul  dst[i] = gate[i] / (1 + exp(-gate[i])) · up[i]   (SwiGLU)
// Layout    gate, up, dst: [rows · d_ff] f32, flat
// Launch    one thread per element, 256-thread groups over a 2D grid
// Numerics  f32; exp(-g) overflows to inf for g < -88, giving the exact limit 0

struct Params { n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn silu_mul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        let g = gate[i];
        dst[i] = g / (1.0 + exp(-g)) * up[i];
    }
}
