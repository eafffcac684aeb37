// add_bias  x[r, c] += bias[c]
// Layout    x: [rows, cols] f32; bias: [cols]
// Launch    one thread per element of x, 256-thread groups over a 2D grid
// Numerics  f32

struct Params { n: u32, cols: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;

@compute @workgroup_size(256)
fn add_bias(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        x[i] += bias[i % params.cols];
    }
}
