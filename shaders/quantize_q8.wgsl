// quantize_q8  x's rows to int8 blocks for the int8 GEMV (q8_blocks.wgsl has the blocks' layout and numerics)
// Layout       x: [m, k] f32 read as vec4 (k a multiple of 32); xq: q8_blocks' words for m rows of k / 32 blocks
// Launch       one thread per vec4 of x, 256-thread groups over grid_1d's 2D grid
// Numerics     q8_blocks.wgsl's (the block's max and Σq exact, round() ties to even)

struct Params { blocks: u32, m: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> xq: array<u32>;

@compute @workgroup_size(256)
fn quantize_q8(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let g = (wg.x + wg.y * nwg.x) * 256u + lane;
    let total = params.blocks * params.m;
    let inside = g < 8u * total;
    store_q8(select(vec4<f32>(0.0), x[min(g, 8u * total - 1u)], inside), g, lane, total, inside);
}
