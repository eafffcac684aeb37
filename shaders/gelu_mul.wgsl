// gelu_mul  dst[i] = gelu(gate[i]) · up[i], gelu(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³)))   (GeGLU, Gemma)
// Layout    gate, up, dst: [rows · d_ff] f32, flat
// Launch    one thread per element, 256-thread groups over a 2D grid
// Numerics  f32; tanh's argument clamped to ±10 (tanh(10) is 1 in f32) so an exp-based tanh cannot give inf/inf

struct Params { n: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn gelu_mul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        let g = gate[i];
        let u = 0.7978846 * (g + 0.044715 * g * g * g);
        dst[i] = 0.5 * g * (1.0 + tanh(clamp(u, -10.0, 10.0))) * up[i];
    }
}
