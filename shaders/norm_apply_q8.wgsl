// norm_apply_q8  norm_apply's dst, and dst's rows as int8 blocks for the int8 GEMV that reads them next, in the
//                norm's dispatch (rms_norm, add_rms_norm with Variant::q8): the quantize_q8 dispatch is saved
// Layout         x, gain, dst: the joining kernel's bindings; xq: q8_blocks' words for params.rows rows of
//                params.d / 32 blocks (its binding declared by the source builder, after the kernel's own)
// Launch         called by every lane of the row's workgroup: one lane per vec4 of the row per pass, all lanes
//                in every pass (store_q8's barriers); params.d a multiple of 32
// Numerics       each value (x · scale) · gain as norm_apply's, its block as quantize_q8's of that dst

fn apply_norm(start: u32, scale: f32, lane: u32) {
    // add_rms_norm's lanes wrote x in the order of their sums, another lane's values than these.
    storageBarrier();
    let vecs = params.d / 4u;
    let row = start / params.d;
    let total = params.rows * (params.d / 32u);
    for (var base = 0u; base < vecs; base += WG) {
        let j = base + lane;
        let inside = j < vecs;
        var o = vec4<f32>(0.0);
        if (inside) {
            let i = start + 4u * j;
            let v = vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
            let g = vec4<f32>(gain[4u * j], gain[4u * j + 1u], gain[4u * j + 2u], gain[4u * j + 3u]);
            o = v * scale * g;
            dst[i] = o.x;
            dst[i + 1u] = o.y;
            dst[i + 2u] = o.z;
            dst[i + 3u] = o.w;
        }
        store_q8(o, row * vecs + j, lane, total, inside);
    }
}
