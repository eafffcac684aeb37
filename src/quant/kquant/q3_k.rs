//! Q3_K: 110 bytes per 256 values. Layout (`block_q3_K`): 32 bytes `hmask` of high bits, 64
//! bytes `qs` of 2-bit low parts (packed as Q2_K's), 12 bytes of sixteen 6-bit scales, f16 `d`.
//! Value v's low bits are at `qs[32·(v/128) + v%32]` bits `2·((v%128)/32)`; its high bit is bit
//! `v/32` of `hmask[v%32]`, and a *clear* high bit subtracts 4. Scale j (of values 16j..16j+16)
//! keeps its low 4 bits in byte `j%8` (low nibble for j < 8, high otherwise) and its top 2 bits
//! in byte `8 + j%4` at bit `2·(j/4)`; it is stored plus 32. `x = (d·(sc - 32))·q`, q in -4..=3.

use super::search::{make_q3_quants, nearest_int};
use super::{Q3_K_BLOCK_BYTES, QK_K, dequantize_blocks, f16_at, pack_2bit, put_f16, quantize_blocks};

const QS: usize = 32;
const SCALES: usize = 96;
const D: usize = 108;

/// Sub-block j's scale, signed (stored value minus 32).
#[inline]
pub(crate) fn scale(scales: &[u8], j: usize) -> i32 {
    let low = if j < 8 { scales[j] & 0xf } else { scales[j - 8] >> 4 };
    let high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i32 - 32
}

pub fn dequantize_block_q3_k(block: &[u8; Q3_K_BLOCK_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_at(block, D);
    let (hmask, scales) = (&block[..QS], &block[SCALES..D]);
    // Each half of 128 values: 32 bytes of qs, four 2-bit planes of 32 values each, and the
    // plane's bit of hmask; 16 values per sub-block.
    for (h, (qs, y)) in block[QS..SCALES].chunks_exact(32).zip(out.chunks_exact_mut(128)).enumerate() {
        for (j, y) in y.chunks_exact_mut(16).enumerate() {
            let (plane, half) = (j / 2, 16 * (j % 2));
            let dl = d * scale(scales, 8 * h + j) as f32;
            let (qs, hm) = (&qs[half..half + 16], &hmask[half..half + 16]);
            for ((y, &q), &m) in y.iter_mut().zip(qs).zip(hm) {
                let high_clear = (m >> (4 * h + plane)) & 1 == 0;
                let level = ((q >> (2 * plane)) & 3) as i32 - if high_clear { 4 } else { 0 };
                *y = dl * level as f32;
            }
        }
    }
}

/// dst = the values of `src`, whole Q3_K blocks holding exactly `dst.len()` values.
/// Panics if the lengths disagree.
pub fn dequantize_row_q3_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, dequantize_block_q3_k);
}

/// ggml's `quantize_row_q3_K_ref`:
/// 1. per sub-block of 16: `make_q3_quants(nmax = 4)` (levels -4..=3, weights x², coordinate
///    descent) gives a signed scale;
/// 2. the scale of largest magnitude, `max_scale`, sets `iscale = -32/max_scale`; each scale
///    becomes `clamp(nearest_int(iscale·scale), -32, 31) + 32` (6 bits), and `d = 1/iscale`;
/// 3. `d` is rounded to f16 and every value requantized against the stored scales,
///    `q = clamp(nearest_int(x/(d·sc)), -4, 3)`, except in sub-blocks whose stored scale is
///    zero, which keep the levels of step 1.
///
/// With every sub-block scale zero, `d` is 0 and the scale bytes are 0 (each scale reads as -32).
pub fn quantize_block_q3_k(x: &[f32; QK_K], y: &mut [u8; Q3_K_BLOCK_BYTES]) {
    let mut levels = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut amax) = (0f32, 0f32);
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        scales[j] = make_q3_quants(xs, 4, ls);
        if scales[j].abs() > amax {
            amax = scales[j].abs();
            max_scale = scales[j];
        }
    }
    y.fill(0);
    let d = if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        let packed = &mut y[SCALES..D];
        for (j, &s) in scales.iter().enumerate() {
            // ggml keeps nearest_int in an int8_t before clamping; |iscale·s| <= 32 here.
            let l = ((nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
            packed[j % 8] |= (l & 0xf) << (4 * (j / 8));
            packed[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
        }
        put_f16(y, D, 1.0 / iscale)
    } else {
        0.0
    };
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        let dl = d * scale(&y[SCALES..D], j) as f32;
        if dl == 0.0 {
            continue;
        }
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = (nearest_int(v / dl).clamp(-4, 3) + 4) as u8;
        }
    }
    for (v, l) in levels.iter_mut().enumerate() {
        if *l > 3 {
            y[v % 32] |= 1 << (v / 32);
            *l -= 4;
        }
    }
    pack_2bit(&levels, &mut y[QS..SCALES]);
}

/// Writes the Q3_K encoding of `src` over `dst` (exactly `src.len()/256·110` bytes).
/// Panics if the lengths disagree.
pub fn quantize_row_q3_k(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, quantize_block_q3_k);
}
