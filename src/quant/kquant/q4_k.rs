//! Q4_K: 144 bytes per 256 values. Layout (`block_q4_K`): f16 `d`, f16 `dmin`, 12 bytes of
//! eight 6-bit (scale, min) pairs, 128 bytes of nibbles. Value v is in sub-block `v/32`; its
//! nibble is in byte `32·(v/64) + v%32`, low for `v%64 < 32`, high otherwise.
//! `x = (d·sc)·q - (dmin·m)`.
//!
//! The scale/min packing and the quantizer's search are shared with Q5_K (`q5_k.rs`).

use super::search::{Grid, make_qkx2_quants, nearest_int};
use super::{Q4_K_BLOCK_BYTES, QK_K, dequantize_blocks, f16_at, put_f16, quantize_blocks};

/// ggml's `get_scale_min_k4`: sub-block j's 6-bit scale and min. Pairs 0..4 sit in the low 6
/// bits of bytes j and j+4; pairs 4..8 keep their low 4 bits in byte j+4 and their top 2 bits in
/// the spare top bits of bytes j-4 (scale) and j (min).
#[inline]
pub(crate) fn scale_min(scales: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        ((scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))
    }
}

/// The inverse of [`scale_min`] for eight pairs of 6-bit values.
fn pack_scale_mins(ls: &[u8; 8], lm: &[u8; 8], scales: &mut [u8]) {
    scales[..12].fill(0);
    for j in 0..8 {
        if j < 4 {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (ls[j] & 0xf) | ((lm[j] & 0xf) << 4);
            scales[j - 4] |= (ls[j] >> 4) << 6;
            scales[j] |= (lm[j] >> 4) << 6;
        }
    }
}

/// Sub-block j's `(d·sc, dmin·m)` of a Q4_K/Q5_K block.
pub(super) fn sub_block_scale(d: f32, dmin: f32, scales: &[u8], j: usize) -> (f32, f32) {
    let (sc, m) = scale_min(scales, j);
    (d * sc as f32, dmin * m as f32)
}

pub fn dequantize_block_q4_k(block: &[u8; Q4_K_BLOCK_BYTES], out: &mut [f32; QK_K]) {
    let (d, dmin, scales) = (f16_at(block, 0), f16_at(block, 2), &block[4..16]);
    // Each 32 bytes hold 64 values: low nibbles the first sub-block, high nibbles the second.
    for (c, (qs, y)) in block[16..].chunks_exact(32).zip(out.chunks_exact_mut(64)).enumerate() {
        let (d1, m1) = sub_block_scale(d, dmin, scales, 2 * c);
        let (d2, m2) = sub_block_scale(d, dmin, scales, 2 * c + 1);
        let (lo, hi) = y.split_at_mut(32);
        for ((&q, lo), hi) in qs.iter().zip(lo).zip(hi) {
            *lo = d1 * (q & 0xf) as f32 - m1;
            *hi = d2 * (q >> 4) as f32 - m2;
        }
    }
}

/// dst = the values of `src`, whole Q4_K blocks holding exactly `dst.len()` values.
/// Panics if the lengths disagree.
pub fn dequantize_row_q4_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, dequantize_block_q4_k);
}

/// What the shared Q4_K/Q5_K quantizer produces: f16 `d` and `dmin` (as stored), the 12 packed
/// scale bytes and each value's level in 0..=nmax.
pub(super) struct ScaleMinBlock {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub levels: [u8; QK_K],
}

/// ggml's `quantize_row_q4_K_ref` / `quantize_row_q5_K_ref` up to the bit packing:
/// 1. per sub-block of 32: weights `w = sqrt(Σx²/32) + |x|`, then [`make_qkx2_quants`] for a
///    scale and min (levels 0..=nmax);
/// 2. the eight scales and mins become 6-bit integers: `d = max_scale/63` and
///    `sc = min(63, nearest_int(63/max_scale · scale))` (the same for mins with `dmin`);
/// 3. `d` and `dmin` are rounded to f16 and every value is requantized against the stored
///    scales: `q = clamp(nearest_int((x + dmin·m)/(d·sc)), 0, nmax)`, except in sub-blocks whose
///    stored scale is zero, which keep the levels of step 1.
pub(super) fn quantize_scale_min(x: &[f32; QK_K], nmax: i32, grid: &Grid) -> ScaleMinBlock {
    let mut levels = [0u8; QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for (j, (xs, ls)) in x.chunks_exact(32).zip(levels.chunks_exact_mut(32)).enumerate() {
        let sum_x2 = xs.iter().fold(0f32, |s, &v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0f32; 32];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) = make_qkx2_quants(xs, &weights, nmax, ls, grid);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // ggml stores nearest_int into a uint8_t before clamping: the `as u8` wrap is its behaviour
    // for a negative scale (which the search does not produce on finite input).
    let ls: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    let mut block = ScaleMinBlock { d: [0; 2], dmin: [0; 2], scales: [0; 12], levels };
    pack_scale_mins(&ls, &lm, &mut block.scales);
    let d = put_f16(&mut block.d, 0, max_scale / 63.0);
    let dmin = put_f16(&mut block.dmin, 0, max_min / 63.0);
    for (j, (xs, ls)) in x.chunks_exact(32).zip(block.levels.chunks_exact_mut(32)).enumerate() {
        let (sc, m) = scale_min(&block.scales, j);
        let dl = d * sc as f32;
        if dl == 0.0 {
            continue;
        }
        let dm = dmin * m as f32;
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = nearest_int((v + dm) / dl).clamp(0, nmax) as u8;
        }
    }
    block
}

/// ggml's `quantize_row_q4_K_ref`: [`quantize_scale_min`] with levels 0..=15 and candidate
/// step counts `15 - 1 + 0.1·i`, i in 0..=20 (squared error), then nibbles packed as
/// [`dequantize_block_q4_k`] reads them.
pub fn quantize_block_q4_k(x: &[f32; QK_K], y: &mut [u8; Q4_K_BLOCK_BYTES]) {
    let grid = Grid { rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false };
    let b = quantize_scale_min(x, 15, &grid);
    y[0..2].copy_from_slice(&b.d);
    y[2..4].copy_from_slice(&b.dmin);
    y[4..16].copy_from_slice(&b.scales);
    for (q, l) in y[16..].chunks_exact_mut(32).zip(b.levels.chunks_exact(64)) {
        for (i, byte) in q.iter_mut().enumerate() {
            *byte = l[i] | (l[i + 32] << 4);
        }
    }
}

/// Writes the Q4_K encoding of `src` over `dst` (exactly `src.len()/256·144` bytes).
/// Panics if the lengths disagree.
pub fn quantize_row_q4_k(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, quantize_block_q4_k);
}
