// add_assign  x[i] += y[i]   (residual)
// Layout      x, y: [n] f32, flat
// Launch      one thread per element, 256-thread groups over a 2D grid
// Numerics    f32

struct Params { n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;

@compute @workgroup_size(256)
fn add_assign(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        x[i] += y[i];
    }
}
