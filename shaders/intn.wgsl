// intn      helpers of the group-wise INT-b / NF4 decoders (decode_int*.wgsl, decode_nf4*.wgsl and their decode32_*):
//           NF4 level lookup, unsigned bytes, INT-b headers
// Layout    weights read through `word(i)` (common.wgsl, matmul_vec.wgsl), so both the u32 and the vec4<u32> kernels join
//           it; NF4 weights carry their 16 levels as f32 bits at word info.sc (wgpu/repack.rs); the composer puts
//           `const INTN_SHIFT` first: a block (a group; NF4_DQ two) is 32 << INTN_SHIFT values
// Launch    none (library text, joined before the group-wise decoders)
// Numerics  the levels are bitsandbytes' f32 constants (src/quant/intn/mod.rs `NF4`), bit for bit

// The NF4 levels of four codes (each 0..15) from the weight's 16-word level table at word `at` (info.sc): loads
// that stay in cache. (A constant array indexed by a run-time code is a private-memory copy per call: on lavapipe
// an NF4 GEMV with one ran past the device wait's timeout.)
fn nf4x4(at: u32, c: vec4<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(word(at + c.x), word(at + c.y), word(at + c.z), word(at + c.w)));
}

// Four unsigned bytes of a word, lowest first, as f32.
fn ubytes4(q: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u)) & vec4<u32>(0xffu));
}

// (d, z) of an INT-b header word: f16 d in the low half, the zero point in byte 2.
fn intn_dz(h: u32) -> vec2<f32> {
    return vec2<f32>(unpack2x16float(h).x, f32((h >> 16u) & 0xffu));
}
