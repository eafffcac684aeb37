// gemv_xq8  how matmul_vec reads int8 x and multiplies a block by it (llama.cpp's MMVQ): block_acc adds
//           d·(d_x·Σ q·q_x + INT_OFF·s_x) [+ m·s_x] for four weight rows, the integer sums by dot4I8Packed
// Layout    x: quantize_q8.wgsl's blocks, read as vec4<u32> (`xload`): row i, block b is j = i·blocks + b, its
//           quants vec4s 2j and 2j + 1, its (d_x, s_x) the f32 pair j of the section after m·blocks blocks;
//           the decoder gives a block's values as packed signed bytes (`ints`: value = byte + INT_OFF)
// Launch    none (joined into matmul_vec and matmul_vec_parts in place of gemv_x32.wgsl, for formats whose decoder
//           has `ints`)
// Numerics  the integer sums are exact; f32 after: one I2F and two fmas per row and block [+ the minimum's]

struct XBlk { a: vec4<u32>, b: vec4<u32>, d: f32, s: f32 }

// Block b of x's row i.
fn xq_block(i: u32, b: u32) -> XBlk {
    let j = i * info.blocks + b;
    let pair = bitcast<vec4<f32>>(xload(2u * m_rows * info.blocks + (j >> 1u)));
    let ds = select(pair.xy, pair.zw, (j & 1u) == 1u);
    return XBlk(bitcast<vec4<u32>>(xload(2u * j)), bitcast<vec4<u32>>(xload(2u * j + 1u)), ds.x, ds.y);
}

// Σ q·q_x over a block, exactly.
fn idot(w: Ints, x: XBlk) -> i32 {
    let lo = (dot4I8Packed(w.a.x, x.a.x) + dot4I8Packed(w.a.y, x.a.y))
        + (dot4I8Packed(w.a.z, x.a.z) + dot4I8Packed(w.a.w, x.a.w));
    let hi = (dot4I8Packed(w.b.x, x.b.x) + dot4I8Packed(w.b.y, x.b.y))
        + (dot4I8Packed(w.b.z, x.b.z) + dot4I8Packed(w.b.w, x.b.w));
    return lo + hi;
}

// Block b of four weight rows (loaded) against row i of x, added to acc.
fn block_acc(w: Raw4, b: u32, i: u32, acc: vec4<f32>) -> vec4<f32> {
    let x = xq_block(i, b);
    let dots = vec4<f32>(vec4<i32>(idot(ints(w.r0), x), idot(ints(w.r1), x), idot(ints(w.r2), x), idot(ints(w.r3), x)));
    let d = vec4<f32>(w.r0.d, w.r1.d, w.r2.d, w.r3.d);
    var a = fma(d, fma(vec4<f32>(x.d), dots, vec4<f32>(INT_OFF * x.s)), acc);
    if (HAS_MIN) {
        a = fma(vec4<f32>(w.r0.m, w.r1.m, w.r2.m, w.r3.m), vec4<f32>(x.s), a);
    }
    return a;
}
