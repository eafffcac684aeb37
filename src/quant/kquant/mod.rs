//! ggml's k-quants: super-blocks of 256 values split into sub-blocks of 16 or 32, each sub-block
//! with its own small integer scale (and min), the scales themselves scaled by one or two f16
//! per super-block. Layouts: `block_q2_K` … `block_q6_K` in ggml's `ggml-common.h`.
//!
//! | format | bytes | sub-blocks | value |
//! | --- | --- | --- | --- |
//! | Q2_K | 84 | 16 × 16, 4-bit scale and min | `d·sc·q - dmin·m`, q in 0..=3 |
//! | Q3_K | 110 | 16 × 16, 6-bit signed scale | `d·(sc - 32)·q`, q in -4..=3 |
//! | Q4_K | 144 | 8 × 32, 6-bit scale and min | `d·sc·q - dmin·m`, q in 0..=15 |
//! | Q5_K | 176 | 8 × 32, 6-bit scale and min | `d·sc·q - dmin·m`, q in 0..=31 |
//! | Q6_K | 210 | 16 × 16, 8-bit signed scale | `d·sc·q`, q in -32..=31 |
//!
//! Dequantizers (the reference every kernel is tested against) do ggml's arithmetic in f32 in
//! ggml's order, each product and difference rounded on its own (no fused multiply-add):
//! `(d·sc)·q - (dmin·m)` and `(d·sc)·q`. That is also what the `gguf` Python package computes,
//! so `tests/kquant.rs` asks for its golden floats bit for bit.
//!
//! Quantizers follow ggml's `quantize_row_q*_K_ref` (what `llama-quantize` writes when it is given
//! no importance matrix); see each format's file for its search, and `search.rs` for the rounding.
//! They reproduce the bytes of ggml's own C built without floating-point contraction
//! (`tests/kquant.rs`, data in `tests/data/quant/kquant_ggml.json`). `mix` chooses a k-quant per
//! tensor as `llama-quantize`'s file types (Q4_K_M, ...) do.

pub mod mix;
mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod search;

pub use q2_k::{dequantize_block_q2_k, dequantize_row_q2_k, quantize_block_q2_k, quantize_row_q2_k};
/// The packed sub-block scales, for the CPU backend's fused kernels (which must match the dequantizers)
/// and its int8 path's reference (every target).
#[cfg(target_arch = "x86_64")]
pub(crate) use q3_k::scale as q3_k_scale;
pub use q3_k::{dequantize_block_q3_k, dequantize_row_q3_k, quantize_block_q3_k, quantize_row_q3_k};
pub(crate) use q4_k::scale_min as q4_k_scale_min;
pub use q4_k::{dequantize_block_q4_k, dequantize_row_q4_k, quantize_block_q4_k, quantize_row_q4_k};
pub use q5_k::{dequantize_block_q5_k, dequantize_row_q5_k, quantize_block_q5_k, quantize_row_q5_k};
pub use q6_k::{dequantize_block_q6_k, dequantize_row_q6_k, quantize_block_q6_k, quantize_row_q6_k};

use half::f16;

/// Values per super-block (ggml's `QK_K`).
pub const QK_K: usize = 256;
pub const Q2_K_BLOCK_BYTES: usize = 84;
pub const Q3_K_BLOCK_BYTES: usize = 110;
pub const Q4_K_BLOCK_BYTES: usize = 144;
pub const Q5_K_BLOCK_BYTES: usize = 176;
pub const Q6_K_BLOCK_BYTES: usize = 210;

/// Runs a block dequantizer over a row. Panics if `src` and `dst` are not the same number of
/// whole super-blocks.
fn dequantize_blocks<const B: usize>(src: &[u8], dst: &mut [f32], block: fn(&[u8; B], &mut [f32; QK_K])) {
    let (blocks, rest) = src.as_chunks::<B>();
    let (outs, tail) = dst.as_chunks_mut::<QK_K>();
    assert!(
        rest.is_empty() && tail.is_empty() && blocks.len() == outs.len(),
        "k-quant dequantize: {} bytes do not hold {} values in blocks of {B} bytes",
        src.len(),
        dst.len()
    );
    blocks.iter().zip(outs).for_each(|(b, y)| block(b, y));
}

/// Runs a block quantizer over a row. Panics if `src` and `dst` are not the same number of
/// whole super-blocks.
fn quantize_blocks<const B: usize>(src: &[f32], dst: &mut [u8], block: fn(&[f32; QK_K], &mut [u8; B])) {
    let (xs, tail) = src.as_chunks::<QK_K>();
    let (ys, rest) = dst.as_chunks_mut::<B>();
    assert!(
        rest.is_empty() && tail.is_empty() && xs.len() == ys.len(),
        "k-quant quantize: {} values do not fill {} bytes in blocks of {B} bytes",
        src.len(),
        dst.len()
    );
    xs.iter().zip(ys).for_each(|(x, y)| block(x, y));
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Stores `v` as f16 (round to nearest even, as ggml's `GGML_FP32_TO_FP16`) and returns the
/// stored value as f32: ggml requantizes against the rounded scale, not the exact one.
fn put_f16(bytes: &mut [u8], at: usize, v: f32) -> f32 {
    let h = f16::from_f32(v);
    bytes[at..at + 2].copy_from_slice(&h.to_le_bytes());
    h.to_f32()
}

/// Packs 256 levels of 2 bits (Q2_K, and Q3_K's low bits) into 64 bytes: value v goes to byte
/// `32·(v/128) + v%32`, bits `2·((v%128)/32)`.
fn pack_2bit(levels: &[u8; QK_K], qs: &mut [u8]) {
    for (half, (q, l)) in qs.chunks_exact_mut(32).zip(levels.chunks_exact(128)).enumerate() {
        debug_assert!(half < 2);
        for (i, byte) in q.iter_mut().enumerate() {
            *byte = (l[i] & 3) | (l[i + 32] & 3) << 2 | (l[i + 64] & 3) << 4 | (l[i + 96] & 3) << 6;
        }
    }
}
