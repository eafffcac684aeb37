// common    helpers joined in front of every weight-reading kernel (matmul, matmul_tiled, embed)
// Layout    weights are `w: array<u32>` declared by the body; decode_<format>.wgsl reads them
// Launch    none (library text)
// Numerics  f32; Vals8 carries 8 consecutive decoded values of one weight row

struct Vals8 { a: vec4<f32>, b: vec4<f32> }

// The weight's geometry, shared by every body's Params as its first field (eight words: a
// uniform struct's next member starts 16-byte aligned).
struct WeightInfo {
    k: u32,      // values per row
    blocks: u32, // 32-value blocks per row (k / 32 for quantized formats, k otherwise)
    qh: u32,     // word offset of the high-bit section (Q5_*, Q5_K, Q6_K; Q3_K's hmask)
    d: u32,      // word offset of the scale section (quantized formats: d, or d and m)
    sc: u32,     // word offset of the k-quants' packed sub-block scales (NF4: of its 16 levels)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

// Four unsigned bytes of a word, lowest first.
fn bytes4(q: u32) -> vec4<u32> {
    return vec4<u32>(q & 0xffu, (q >> 8u) & 0xffu, (q >> 16u) & 0xffu, q >> 24u);
}

// Four signed bytes of a word, lowest first.
fn sbytes4(q: u32) -> vec4<f32> {
    let v = bitcast<vec4<i32>>(vec4<u32>(q << 24u, q << 16u, q << 8u, q)) >> vec4<u32>(24u);
    return vec4<f32>(v);
}

// Nibbles of a word's four bytes (low nibbles when shift = 0, high when shift = 4).
fn nibbles4(q: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) >> vec4<u32>(shift)) & vec4<u32>(0xfu);
}

// Word `i` of the weight (as matmul_vec's word(), for helpers both join: intn.wgsl).
fn word(i: u32) -> u32 {
    return w[i];
}

// The f16 scale of block `blk` from a section of packed f16 pairs.
fn half_at(section: u32, blk: u32) -> f32 {
    return unpack2x16float(w[section + (blk >> 1u)])[blk & 1u];
}
