// norm_apply_q8  norm_apply's dst, and dst's rows as int8 blocks for the int8 GEMV that reads them next, in the
//                norm's dispatch (rms_norm, add_rms_norm with Variant::q8): the quantize_q8 dispatch is saved
// Layout         x, gain, dst: the joining kernel's bindings; xq: q8_blocks' words for params.rows rows of
//                params.d / 32 blocks (its binding declared by the source builder, after the kernel's own)
// Launch         called by every lane of the row's workgroup: one lane per vec4 of the row per pass, all lanes
//                in every pass (store_q8's barriers); params.d a multiple of 32
// Numerics       each value (x · scale) · gain as norm_apply's, its block as quantize_q8's of that dst

// Passes (WG vec4s of the row each) whose x and gain are loaded before the first pass stores: every load of a
// row up to PRE · WG · 4 = 4,096 wide is in flight at once, where loading in each pass waited on each pass's
// loads in turn (store_q8's barriers keep the passes in sequence). Wider rows load their later passes in turn.
const PRE: u32 = 4u;

// vec4 j of the row at start, and of gain (exists: j < d / 4).
fn x4(start: u32, j: u32) -> vec4<f32> {
    let i = start + 4u * j;
    return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}

fn gain4(j: u32) -> vec4<f32> {
    return vec4<f32>(gain[4u * j], gain[4u * j + 1u], gain[4u * j + 2u], gain[4u * j + 3u]);
}

// Pass of vec4 j of the row: dst's values o (computed by the caller) and their int8 block.
fn apply_pass(start: u32, j: u32, o: vec4<f32>, lane: u32, inside: bool) {
    let vecs = params.d / 4u;
    if (inside) {
        let i = start + 4u * j;
        dst[i] = o.x;
        dst[i + 1u] = o.y;
        dst[i + 2u] = o.z;
        dst[i + 3u] = o.w;
    }
    store_q8(o, (start / params.d) * vecs + j, lane, params.rows * (params.d / 32u), inside);
}

fn apply_norm(start: u32, scale: f32, lane: u32) {
    // add_rms_norm's lanes wrote x in the order of their sums, another lane's values than these.
    storageBarrier();
    let vecs = params.d / 4u;
    var xv: array<vec4<f32>, PRE>;
    var gv: array<vec4<f32>, PRE>;
    for (var p = 0u; p < PRE; p++) {
        let j = p * WG + lane;
        if (j < vecs) {
            xv[p] = x4(start, j);
            gv[p] = gain4(j);
        }
    }
    for (var p = 0u; p < PRE; p++) {
        let j = p * WG + lane;
        if (p * WG < vecs) {
            let inside = j < vecs;
            apply_pass(start, j, select(vec4<f32>(0.0), xv[p] * scale * gv[p], inside), lane, inside);
        }
    }
    for (var base = PRE * WG; base < vecs; base += WG) {
        let j = base + lane;
        let inside = j < vecs;
        var o = vec4<f32>(0.0);
        if (inside) {
            o = x4(start, j) * scale * gain4(j);
        }
        apply_pass(start, j, o, lane, inside);
    }
}
