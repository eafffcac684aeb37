// embed     dst[t, :] = scale · table[ids[t], :]   (dequantized; rows of ids ≥ vocab are zero)
// Layout    ids: u32 [n_tokens]; table: [vocab, d] (rows row0 .. row0 + vocab of the table) in the format of the
//           joined decode_*.wgsl; dst: [n_tokens, d], the rows whose ids are in [row0, end)
// Launch    grid (ceil(ceil(d / 8) / 256), n_tokens); one thread per group of 8 values
// Numerics  exact dequantization (the matmul decoders), then one f32 multiply by scale

// The table part holds rows row0 .. row0 + vocab and writes the tokens whose ids are in [row0, end).
struct Params { info: WeightInfo, vocab: u32, n_tokens: u32, scale: f32, row0: u32, end: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn embed(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let d = params.info.k;
    let g = wg.x * 256u + lane;
    let t = wg.y;
    if (g * 8u >= d) {
        return;
    }
    let id = ids[t];
    if (id < params.row0 || id >= params.end) {
        return;
    }
    var v = Vals8(vec4<f32>(0.0), vec4<f32>(0.0));
    if (id - params.row0 < params.vocab) {
        v = decode8(params.info, id - params.row0, g);
    }
    let vals = array<f32, 8>(v.a.x, v.a.y, v.a.z, v.a.w, v.b.x, v.b.y, v.b.z, v.b.w);
    for (var e = 0u; e < 8u; e++) {
        if (g * 8u + e < d) {
            dst[t * d + g * 8u + e] = vals[e] * params.scale;
        }
    }
}
