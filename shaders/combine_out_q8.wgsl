// combine_out_q8  attention_combine's output, and dst's rows as int8 blocks (q8_blocks.wgsl) for the o
//                 projection's int8 GEMV, in the combine's dispatch: the quantize_q8 dispatch is saved
// Layout          dst: the joining kernel's binding; xq: q8_blocks' words for all `blocks` blocks of dst (its
//                 binding declared by the source builder, after the kernel's own)
// Launch          called by every lane of the workgroup (store_q8's barriers); head_dim a multiple of 32, so
//                 that a head's vec4s are whole blocks of eight
// Numerics        the stored values, and their blocks as quantize_q8's of that dst

fn combine_out(g: u32, v: vec4<f32>, lane: u32, blocks: u32, inside: bool) {
    if (inside) {
        dst[g] = v;
    }
    store_q8(v, g, lane, blocks, inside);
}
