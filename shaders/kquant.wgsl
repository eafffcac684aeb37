// kquant    bit helpers of the k-quant decoders (decode_q*_k.wgsl and decode32_q*_k.wgsl): quants as the upload
//           repacks them, sub-block scales as GGUF packs them
// Layout    words in, integers out: reads no buffer, so both the u32 (decode_*) and vec4<u32> (decode32_*) kernels join it
// Launch    none (library text, joined before the k-quant decoders)
// Numerics  exact integer bit manipulation

// Four 2-bit values of a word (repacked 2-bit planes: value l of a word at byte l % 4, bits 2·(l / 4)),
// values 4i .. 4i+3 of its 16 for shift = 2i.
fn crumbs4(q: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) >> vec4<u32>(shift)) & vec4<u32>(3u);
}

// Bits j .. j+3 of h, each 0 or 1 (repacked 1-bit planes: bit l is value l of the block).
fn bits4(h: u32, j: u32) -> vec4<u32> {
    return (vec4<u32>(h >> j) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u);
}

// Q4_K/Q5_K: (scale, min) of 32-value sub-block j from the 12 packed bytes s (ggml's get_scale_min_k4):
// j < 4 the low 6 bits of bytes j and j + 4; else the nibbles of byte j + 4 and, above them, the top
// 2 bits of bytes j - 4 (scale) and j (min).
fn scale_min_k4(s: vec3<u32>, j: u32) -> vec2<u32> {
    let sh = 8u * (j & 3u);
    let lo = vec2<u32>(s.x >> sh, s.y >> sh);
    let hi = s.z >> sh;
    let wide = vec2<u32>(hi & 0xfu, (hi >> 4u) & 0xfu) | (((lo >> vec2<u32>(6u)) & vec2<u32>(3u)) << vec2<u32>(4u));
    return select(lo & vec2<u32>(63u), wide, j >= 4u);
}

// Q3_K: signed scale of 16-value sub-block j from the 12 packed bytes s: the low 4 bits in byte j % 8 (low
// nibble for j < 8), the top 2 at bits 2·(j / 4) of byte 8 + j % 4, stored plus 32.
fn scale_q3_k(s: vec3<u32>, j: u32) -> f32 {
    let lw = select(s.x, s.y, (j & 7u) >= 4u);
    let low = (lw >> (8u * (j & 3u) + 4u * (j >> 3u))) & 0xfu;
    let high = (s.z >> (8u * (j & 3u) + 2u * (j >> 2u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

// The two bytes of half `hf` of a word, as unsigned (x: lower byte).
fn byte_pair(q: u32, hf: u32) -> vec2<u32> {
    let p = q >> (16u * hf);
    return vec2<u32>(p & 0xffu, (p >> 8u) & 0xffu);
}

// The same two bytes, signed (Q6_K's scales).
fn sbyte_pair(q: u32, hf: u32) -> vec2<f32> {
    let p = q >> (16u * hf);
    return vec2<f32>(f32(i32(p << 24u) >> 24u), f32(i32(p << 16u) >> 24u));
}
