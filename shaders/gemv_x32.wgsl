// gemv_x32  how matmul_vec reads f32 x and multiplies a block by it (block_acc): the x block's 32 values, then
//           dot32_f32.wgsl's products
// Layout    x: [m, k] f32 read as vec4 through the entry point's `xload`
// Launch    none (joined into matmul_vec, matmul_vec_parts, matmul_vec_silu before gemv.wgsl; gemv_xq8.wgsl instead
//           with int8 activations)
// Numerics  dot32_f32.wgsl's

// x[i, 32b .. 32b+31].
fn xblock(i: u32, b: u32) -> Blk {
    let at = i * (info.k >> 2u) + b * 8u;
    return Blk(xf(at), xf(at + 1u), xf(at + 2u), xf(at + 3u), xf(at + 4u), xf(at + 5u), xf(at + 6u), xf(at + 7u));
}

// Block b of four weight rows (loaded) against row i of x, added to acc.
fn block_acc(w: Raw4, b: u32, i: u32, acc: vec4<f32>) -> vec4<f32> {
    return block_acc_x(w, xblock(i, b), acc);
}
