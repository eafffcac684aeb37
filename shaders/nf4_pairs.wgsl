// nf4_pairs  the NF4 levels of a 32-value run for matmul_vec from a 256-entry pair table: one vec4 load per code
//            byte
// Layout     the table at vec4 (info.sc >> 2) + 4, after the 16 levels (repack.rs): entry c = (NF4[c & 15],
//            NF4[c >> 4], 0, 0) as f32 bits, so byte j of a run (value j in the low nibble, value j + 16 in the high)
//            gives both of its levels
// Launch     none (joined into matmul_vec before decode32_nf4 / decode32_nf4_dq, after intn.wgsl)
// Numerics   the levels bit for bit (src/quant/intn/mod.rs `NF4`); half the loads of one level per value (nf4x4)

struct Pairs4 { lo: vec4<f32>, hi: vec4<f32> }

// The levels of the four code bytes of q: .lo the low nibbles', .hi the high ones'.
fn pairs4(at: u32, q: u32) -> Pairs4 {
    let e0 = bitcast<vec2<f32>>(wload(at + (q & 0xffu)).xy);
    let e1 = bitcast<vec2<f32>>(wload(at + ((q >> 8u) & 0xffu)).xy);
    let e2 = bitcast<vec2<f32>>(wload(at + ((q >> 16u) & 0xffu)).xy);
    let e3 = bitcast<vec2<f32>>(wload(at + (q >> 24u)).xy);
    return Pairs4(vec4<f32>(e0.x, e1.x, e2.x, e3.x), vec4<f32>(e0.y, e1.y, e2.y, e3.y));
}

// The 32 levels of a run's codes q (Q4_0's order: quad i is word i's low nibbles, quad 4 + i its high ones), from the
// pair table at vec4 `at`.
fn nf4_vals(at: u32, q: vec4<u32>) -> Blk {
    let a = pairs4(at, q.x);
    let b = pairs4(at, q.y);
    let c = pairs4(at, q.z);
    let d = pairs4(at, q.w);
    return Blk(a.lo, b.lo, c.lo, d.lo, a.hi, b.hi, c.hi, d.hi);
}
