// coop_store  the epilogue of the cooperative-matrix GEMMs (matmul_coop, matmul_coop16): a subgroup's C tile out to dst
// Layout      dst: [m, ldd] f32, columns col0 .. col0 + n (the joining kernel's `params` and `dst`)
// Launch      none (joined after the kernel's declarations); called by every lane of the workgroup, tile by tile (its
//             barriers), each subgroup with its own tile
// Numerics    exact copies

// One C tile per subgroup on its way out: a matrix's lane layout is opaque, so it goes through memory.
var<workgroup> cs: array<f32, 4u * CM * CM>;

// C tile `c` of subgroup sg, rows i .. i+CM-1 and columns j .. j+CM-1 of the output, where they exist.
fn store(c: MatC, sg: u32, sl: u32, i: u32, j: u32) {
    let base = sg * CM * CM;
    coopStoreT(c, &cs[base], CM);
    workgroupBarrier();
    for (var e = sl; e < CM * CM; e += SG) {
        let r = i + e / CM;
        let col = j + e % CM;
        if (r < params.m && col < params.n) {
            dst[r * params.ldd + params.col0 + col] = cs[base + e];
        }
    }
    workgroupBarrier(); // cs is rewritten by the next tile
}
