// attention_combine  split-K decoding, pass 2: dst[t, h] = the fold of chunks c = j0 / CHUNK ..= pos[t] / CHUNK of
//                    part[t, h], j0 = first_key(pos[t], window) (the chunks attention wrote)
// Layout             part: vec4 [n_tokens, n_heads, n_chunks, hd/4 + 1] = ((m, l, 0, 0), o[hd/4]); pos: u32 [n_tokens];
//                    dst: vec4 [n_tokens, n_heads · hd/4]
// Launch             grid (n_heads, n_tokens); 64 threads, one vec4 column of the head each (hd ≤ 256), every lane
//                    calling combine_out (combine_out.wgsl, or with Variant::q8 combine_out_q8.wgsl, which also
//                    writes dst's int8 blocks for the o projection's int8 GEMV: hd a multiple of 32)
// Numerics           attention_fold's, chunk by chunk in ascending order: the bits attention_tiled gives

const WG: u32 = 64u;
// Chunks whose partials a lane loads at once.
const FOLD_LOADS: u32 = 8u;

struct Params { n_heads: u32, head_dim: u32, n_chunks: u32, window: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> pos: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn attention_combine(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lane: u32) {
    let hd4 = params.head_dim / 4u;
    let t = wg.y;
    let th = t * params.n_heads + wg.x;
    let last = pos[t] / CHUNK;
    let blocks = nwg.y * params.n_heads * params.head_dim / 32u;  // int8 blocks of all of dst (combine_out_q8)
    for (var base = 0u; base < hd4; base += WG) {
        let c4 = base + lane;
        let inside = c4 < hd4;
        var out = vec4<f32>(0.0);
        if (inside) {
            var run = run_start();
            // FOLD_LOADS chunks' partials are loaded before any is folded, so that their loads are in flight
            // together (the addresses do not depend on the fold); the fold keeps the chunks' order.
            for (var c = first_key(pos[t], params.window) / CHUNK; c <= last; c += FOLD_LOADS) {
                var ml: array<vec4<f32>, FOLD_LOADS>;
                var o: array<vec4<f32>, FOLD_LOADS>;
                for (var k = 0u; k < FOLD_LOADS; k++) {
                    if (c + k <= last) {
                        let b = (th * params.n_chunks + c + k) * (hd4 + 1u);
                        ml[k] = part[b];
                        o[k] = part[b + 1u + c4];
                    }
                }
                for (var k = 0u; k < FOLD_LOADS; k++) {
                    if (c + k <= last) {
                        run = fold(run, ml[k].x, ml[k].y, o[k]);
                    }
                }
            }
            out = finish(run);
        }
        combine_out(th * hd4 + c4, out, lane, blocks, inside);
    }
}
