// intn      helpers of the group-wise INT-b / NF4 decoders (decode_int*.wgsl, decode_nf4*.wgsl and their decode32_*):
//           QLoRA's NF4 levels and unsigned bytes
// Layout    words in, values out: reads no buffer, so both the u32 (decode_*) and vec4<u32> (decode32_*) kernels join it;
//           the composer puts `const INTN_SHIFT` before it: log2 of a block's 32-value runs (block = 32 << INTN_SHIFT values)
// Launch    none (library text, joined before the group-wise decoders)
// Numerics  the levels are bitsandbytes' f32 constants (src/quant/intn/mod.rs `NF4`), each written so it parses to that f32

const NF4_LEVELS = array<f32, 16>(
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0);

// The NF4 levels of four codes (each 0..15).
fn nf4x4(c: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(NF4_LEVELS[c.x], NF4_LEVELS[c.y], NF4_LEVELS[c.z], NF4_LEVELS[c.w]);
}

// Four unsigned bytes of a word, lowest first, as f32.
fn ubytes4(q: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u)) & vec4<u32>(0xffu));
}

// (d, z) of an INT-b header word: f16 d in the low half, the zero point in byte 2.
fn intn_dz(h: u32) -> vec2<f32> {
    return vec2<f32>(unpack2x16float(h).x, f32((h >> 16u) & 0xffu));
}
