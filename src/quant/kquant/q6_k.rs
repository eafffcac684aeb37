//! Q6_K: 210 bytes per 256 values. Layout (`block_q6_K`): 128 bytes `ql` of low nibbles, 64
//! bytes `qh` of 2-bit high parts, 16 signed 8-bit sub-block scales, f16 `d`.
//! For value v, with `h = v/128`, `r = v%128`, `l = r%32` and quarter `k = r/32`: the low nibble is
//! in `ql[64h + l + 32·(k%2)]` (low nibble for k < 2, high for k ≥ 2), the high two bits are bits
//! `2k` of `qh[32h + l]`, and the scale is `scales[v/16]`. `x = (d·sc)·(q - 32)`.

use super::search::{GROUP_MAX_EPS, make_qx_quants, nearest_int};
use super::{Q6_K_BLOCK_BYTES, QK_K, dequantize_blocks, f16_at, put_f16, quantize_blocks};

/// Offsets of the parts of a block.
const QH: usize = 128;
const SCALES: usize = 192;
const D: usize = 208;

pub fn dequantize_block_q6_k(block: &[u8; Q6_K_BLOCK_BYTES], out: &mut [f32; QK_K]) {
    let d = f16_at(block, D);
    // Each half of 128 values: 64 bytes of ql, 32 of qh, 8 scales.
    for (h, y) in out.chunks_exact_mut(128).enumerate() {
        let (ql, qh, sc) =
            (&block[64 * h..64 * h + 64], &block[QH + 32 * h..QH + 32 * h + 32], &block[SCALES + 8 * h..]);
        for (k, y) in y.chunks_exact_mut(32).enumerate() {
            let (ql, shift) = (&ql[32 * (k % 2)..32 * (k % 2) + 32], 4 * (k / 2));
            for (l, y) in y.iter_mut().enumerate() {
                let q = ((ql[l] >> shift) & 0xf) | (((qh[l] >> (2 * k)) & 3) << 4);
                *y = d * sc[l / 16 + 2 * k] as i8 as f32 * (q as i32 - 32) as f32;
            }
        }
    }
}

/// dst = the values of `src`, whole Q6_K blocks holding exactly `dst.len()` values.
/// Panics if the lengths disagree.
pub fn dequantize_row_q6_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, dequantize_block_q6_k);
}

/// ggml's `quantize_row_q6_K_ref`:
/// 1. per sub-block of 16: `make_qx_quants(nmax = 32)` (levels -32..=31, weights x²) gives a
///    signed scale;
/// 2. the scale of largest magnitude, `max_scale`, sets `d = -max_scale/128` (through
///    `iscale = -128/max_scale`, `d = 1/iscale`), and each sub-block scale becomes
///    `min(127, nearest_int(iscale·scale))` as an i8;
/// 3. `d` is rounded to f16 and every value requantized against the stored scales,
///    `q = clamp(nearest_int(x/(d·sc)), -32, 31)`, except in sub-blocks whose stored scale is
///    zero, which keep the levels of step 1.
///
/// A block whose sub-block scales are all below `GROUP_MAX_EPS` in magnitude is all zero bytes.
pub fn quantize_block_q6_k(x: &[f32; QK_K], y: &mut [u8; Q6_K_BLOCK_BYTES]) {
    let mut levels = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        scales[j] = make_qx_quants(xs, 32, ls);
        if scales[j].abs() > max_abs_scale {
            max_abs_scale = scales[j].abs();
            max_scale = scales[j];
        }
    }
    y.fill(0);
    if max_abs_scale < GROUP_MAX_EPS {
        return;
    }
    let iscale = -128.0 / max_scale;
    let d = put_f16(y, D, 1.0 / iscale);
    for (j, &s) in scales.iter().enumerate() {
        y[SCALES + j] = nearest_int(iscale * s).min(127) as i8 as u8;
    }
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        let dl = d * y[SCALES + j] as i8 as f32;
        if dl == 0.0 {
            continue;
        }
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = (nearest_int(v / dl).clamp(-32, 31) + 32) as u8;
        }
    }
    for (v, &q) in levels.iter().enumerate() {
        let (h, r) = (v / 128, v % 128);
        let (k, l) = (r / 32, r % 32);
        y[64 * h + l + 32 * (k % 2)] |= (q & 0xf) << (4 * (k / 2));
        y[QH + 32 * h + l] |= (q >> 4) << (2 * k);
    }
}

/// Writes the Q6_K encoding of `src` over `dst` (exactly `src.len()/256·210` bytes).
/// Panics if the lengths disagree.
pub fn quantize_row_q6_k(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, quantize_block_q6_k);
}
