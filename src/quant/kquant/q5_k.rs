//! Q5_K: 176 bytes per 256 values. Layout (`block_q5_K`): f16 `d`, f16 `dmin`, 12 bytes of
//! eight 6-bit (scale, min) pairs (packed as Q4_K's), 32 bytes of fifth bits, 128 bytes of
//! nibbles. Value v's low 4 bits sit where Q4_K puts its nibble; its fifth bit is bit `v/32` of
//! byte `qh[v%32]`. `x = (d·sc)·q - (dmin·m)`, q in 0..=31.

use super::q4_k::{quantize_scale_min, sub_block_scale};
use super::search::Grid;
use super::{Q5_K_BLOCK_BYTES, QK_K, dequantize_blocks, f16_at, quantize_blocks};

pub fn dequantize_block_q5_k(block: &[u8; Q5_K_BLOCK_BYTES], out: &mut [f32; QK_K]) {
    let (d, dmin, scales) = (f16_at(block, 0), f16_at(block, 2), &block[4..16]);
    let qh = &block[16..48];
    for (c, (qs, y)) in block[48..].chunks_exact(32).zip(out.chunks_exact_mut(64)).enumerate() {
        let (d1, m1) = sub_block_scale(d, dmin, scales, 2 * c);
        let (d2, m2) = sub_block_scale(d, dmin, scales, 2 * c + 1);
        let (lo, hi) = y.split_at_mut(32);
        for (((&q, &h), lo), hi) in qs.iter().zip(qh).zip(lo).zip(hi) {
            *lo = d1 * ((q & 0xf) | (((h >> (2 * c)) & 1) << 4)) as f32 - m1;
            *hi = d2 * ((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) as f32 - m2;
        }
    }
}

/// dst = the values of `src`, whole Q5_K blocks holding exactly `dst.len()` values.
/// Panics if the lengths disagree.
pub fn dequantize_row_q5_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, dequantize_block_q5_k);
}

/// ggml's `quantize_row_q5_K_ref`: Q4_K's quantizer (`q4_k::quantize_scale_min`) with levels
/// 0..=31 and candidate step counts `31 - 0.5 + 0.1·i`, i in 0..=15 (squared error), then the
/// low nibbles and fifth bits packed as [`dequantize_block_q5_k`] reads them.
pub fn quantize_block_q5_k(x: &[f32; QK_K], y: &mut [u8; Q5_K_BLOCK_BYTES]) {
    let grid = Grid { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: false };
    let b = quantize_scale_min(x, 31, &grid);
    y[0..2].copy_from_slice(&b.d);
    y[2..4].copy_from_slice(&b.dmin);
    y[4..16].copy_from_slice(&b.scales);
    let (qh, qs) = y[16..].split_at_mut(32);
    qh.fill(0);
    for (v, &l) in b.levels.iter().enumerate() {
        qh[v % 32] |= (l >> 4) << (v / 32);
    }
    for (q, l) in qs.chunks_exact_mut(32).zip(b.levels.chunks_exact(64)) {
        for (i, byte) in q.iter_mut().enumerate() {
            *byte = (l[i] & 0xf) | ((l[i + 32] & 0xf) << 4);
        }
    }
}

/// Writes the Q5_K encoding of `src` over `dst` (exactly `src.len()/256·176` bytes).
/// Panics if the lengths disagree.
pub fn quantize_row_q5_k(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, quantize_block_q5_k);
}
