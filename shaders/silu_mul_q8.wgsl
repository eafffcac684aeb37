// silu_mul_q8  hidden = silu(gate) · up (silu_mul.wgsl's formula and bits), and hidden's rows as int8 blocks for
//              the down projection's int8 GEMV, in one pass: the quantize_q8 dispatch that would follow is saved
// Layout       gate, up, hidden: [m, d_ff] f32 read as vec4 (d_ff a multiple of 32); xq: q8_blocks' words for m
//              rows of d_ff / 32 blocks
// Launch       one thread per vec4 of hidden, 256-thread groups over grid_1d's 2D grid
// Numerics     hidden as silu_mul's; its blocks as quantize_q8's of that hidden

struct Params { blocks: u32, m: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> hidden: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> xq: array<u32>;

@compute @workgroup_size(256)
fn silu_mul_q8(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lane: u32) {
    let g = (wg.x + wg.y * nwg.x) * 256u + lane;
    let total = params.blocks * params.m;
    let inside = g < 8u * total;
    let at = min(g, 8u * total - 1u);
    let gv = gate[at];
    let h = gv / (vec4<f32>(1.0) + exp(-gv)) * up[at];
    if (inside) {
        hidden[g] = h;
    }
    store_q8(select(vec4<f32>(0.0), h, inside), g, lane, total, inside);
}
