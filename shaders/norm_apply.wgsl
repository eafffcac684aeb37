// norm_apply  dst[start + i] = x[start + i] · scale · gain[i] for a lane's values of one row (rms_norm, add_rms_norm)
// Layout      x, gain, dst: the joining kernel's bindings (f32 arrays); params.d values per row
// Launch      called by every lane of the row's workgroup (WG lanes, striding the row)
// Numerics    (x · scale) · gain in f32 per value; four strided values loaded before any is stored (a loop of one
//             load each waited on each in turn)

fn apply_norm(start: u32, scale: f32, lane: u32) {
    var j = lane;
    for (; j + 3u * WG < params.d; j += 4u * WG) {
        let v = vec4<f32>(x[start + j], x[start + j + WG], x[start + j + 2u * WG], x[start + j + 3u * WG]);
        let g = vec4<f32>(gain[j], gain[j + WG], gain[j + 2u * WG], gain[j + 3u * WG]);
        let o = v * scale * g;
        dst[start + j] = o.x;
        dst[start + j + WG] = o.y;
        dst[start + j + 2u * WG] = o.z;
        dst[start + j + 3u * WG] = o.w;
    }
    for (; j < params.d; j += WG) {
        dst[start + j] = x[start + j] * scale * gain[j];
    }
}
