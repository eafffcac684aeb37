// combine_out  attention_combine's output: vec4 g of dst (nothing past the head: `inside` false)
// Layout       dst: the joining kernel's binding
// Launch       called by every lane of the workgroup; lane and blocks unused (combine_out_q8.wgsl's signature)
// Numerics     a store

fn combine_out(g: u32, v: vec4<f32>, lane: u32, blocks: u32, inside: bool) {
    if (inside) {
        dst[g] = v;
    }
}
