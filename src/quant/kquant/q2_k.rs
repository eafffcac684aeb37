//! Q2_K: 84 bytes per 256 values. Layout (`block_q2_K`): 16 bytes of (4-bit scale, 4-bit min)
//! pairs (scale in the low nibble), 64 bytes of 2-bit levels, f16 `d`, f16 `dmin`.
//! Value v is in sub-block `v/16`; its level is at `qs[32·(v/128) + v%32]` bits
//! `2·((v%128)/32)`. `x = (d·sc)·q - (dmin·m)`, q in 0..=3.

use super::search::{Grid, make_qkx2_quants, nearest_int};
use super::{Q2_K_BLOCK_BYTES, QK_K, dequantize_blocks, f16_at, pack_2bit, put_f16, quantize_blocks};

const QS: usize = 16;
const D: usize = 80;
const DMIN: usize = 82;

pub fn dequantize_block_q2_k(block: &[u8; Q2_K_BLOCK_BYTES], out: &mut [f32; QK_K]) {
    let (d, dmin) = (f16_at(block, D), f16_at(block, DMIN));
    // Each half of 128 values: 32 bytes of qs holding four 2-bit planes; 16 values per sub-block.
    for (h, (qs, y)) in block[QS..D].chunks_exact(32).zip(out.chunks_exact_mut(128)).enumerate() {
        for (j, y) in y.chunks_exact_mut(16).enumerate() {
            let (plane, half) = (j / 2, 16 * (j % 2));
            let sc = block[8 * h + j];
            let (dl, ml) = (d * (sc & 0xf) as f32, dmin * (sc >> 4) as f32);
            for (y, &q) in y.iter_mut().zip(&qs[half..half + 16]) {
                *y = dl * ((q >> (2 * plane)) & 3) as f32 - ml;
            }
        }
    }
}

/// dst = the values of `src`, whole Q2_K blocks holding exactly `dst.len()` values.
/// Panics if the lengths disagree.
pub fn dequantize_row_q2_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, dequantize_block_q2_k);
}

/// ggml's `quantize_row_q2_K_ref`:
/// 1. per sub-block of 16: weights `|x|`, then `make_qkx2_quants` for a scale and min (levels
///    0..=3, candidate step counts `3 - 0.5 + 0.1·i`, i in 0..=15, weighted absolute error);
/// 2. the sixteen scales and mins become 4-bit integers: `d = max_scale/15`,
///    `sc = nearest_int(15/max_scale · scale)` (the same for mins with `dmin`; a maximum of 0
///    leaves those nibbles and its f16 at 0);
/// 3. `d` and `dmin` are rounded to f16 and every value requantized against the stored scales,
///    `q = clamp(nearest_int((x + dmin·m)/(d·sc)), 0, 3)`, except in sub-blocks whose stored
///    scale is zero, which keep the levels of step 1.
pub fn quantize_block_q2_k(x: &[f32; QK_K], y: &mut [u8; Q2_K_BLOCK_BYTES]) {
    let grid = Grid { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: true };
    let mut levels = [0u8; QK_K];
    let mut scales = [0f32; 16];
    let mut mins = [0f32; 16];
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        let mut weights = [0f32; 16];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = v.abs();
        }
        (scales[j], mins[j]) = make_qkx2_quants(xs, &weights, 3, ls, &grid);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    y.fill(0);
    // ggml writes nearest_int straight into the uint8_t nibbles (no clamp): scales and mins
    // are at most their maximum, so the levels are at most 15; `as u8` keeps its wrapping.
    let d = if max_scale > 0.0 {
        let iscale = 15.0 / max_scale;
        for (b, &s) in y.iter_mut().zip(&scales) {
            *b = nearest_int(iscale * s) as u8;
        }
        put_f16(y, D, max_scale / 15.0)
    } else {
        0.0
    };
    let dmin = if max_min > 0.0 {
        let iscale = 15.0 / max_min;
        for (b, &m) in y.iter_mut().zip(&mins) {
            *b |= nearest_int(iscale * m).wrapping_shl(4) as u8;
        }
        put_f16(y, DMIN, max_min / 15.0)
    } else {
        0.0
    };
    for (j, (xs, ls)) in x.chunks_exact(16).zip(levels.chunks_exact_mut(16)).enumerate() {
        let dl = d * (y[j] & 0xf) as f32;
        if dl == 0.0 {
            continue;
        }
        let ml = dmin * (y[j] >> 4) as f32;
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = nearest_int((v + ml) / dl).clamp(0, 3) as u8;
        }
    }
    pack_2bit(&levels, &mut y[QS..D]);
}

/// Writes the Q2_K encoding of `src` over `dst` (exactly `src.len()/256·84` bytes).
/// Panics if the lengths disagree.
pub fn quantize_row_q2_k(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, quantize_block_q2_k);
}
