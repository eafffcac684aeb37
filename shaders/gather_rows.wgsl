// gather_rows  dst[i, c] = x[rows[i], c]   (rows[i] ≥ n_src_rows gives zeros)
// Layout       x: [n_src_rows, cols] f32; rows: u32 [n]; dst: [n, cols]
// Launch       one thread per element of dst, 256-thread groups over a 2D grid
// Numerics     exact copy

struct Params { n: u32, cols: u32, n_src_rows: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn gather_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        let r = rows[i / params.cols];
        dst[i] = select(0.0, x[r * params.cols + i % params.cols], r < params.n_src_rows);
    }
}
