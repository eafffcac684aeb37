//! The q8_0 KV cache's rows on the host (`--kv-type q8_0`, llama.cpp's `-ctk q8_0 -ctv q8_0`):
//! what `write_f32` stores and `read_f32` gives back, and the reference for `kv_write_q8.wgsl`.
//!
//! A slot's row of `kv_dim` values (a multiple of 32) is cut into blocks of 32, each stored as
//! llama.cpp's q8_0 stores it: an f16 scale `d = max |x| / 127` and 32 integers `round(x / d)` in
//! [-127, 127] (d taken as max |x| · (1 / 127), within an ulp of the quotient). The bytes are laid
//! out for a GPU that reads u32 words, not as ggml's 34-byte blocks: first the row's `kv_dim` int8
//! values (value 4i + j in byte j of word i, so one word is the vec4 attention stages), then its
//! block scales, two f16 per word (block 2i in the low half). A row is `kv_dim / 4 + ceil(kv_dim /
//! 64)` words: 1.0625 bytes per value when kv_dim is a multiple of 64, as ggml's q8_0.
//!
//! Numerics: q = round-half-even(x · (1 / d)) with d and 1 / d in f32, then d rounded to f16 (the
//! shader's arithmetic: d has the host's bits on every GPU, but 1 / d is the driver's division, so
//! a GPU may put a value that sits on a rounding edge one step away). Reading widens exactly:
//! q · d is exact in f32. A block holding an infinity or NaN stores a NaN scale and zeros, so every
//! value of it reads back NaN: a poisoned slot cannot pass for data.

use crate::error::{Error, Result};

/// Values per block, and so the granularity of kv_dim.
pub const BLOCK: usize = 32;

/// 1 / 127 in f32 (bits 0x3c010204): d = max |x| · INV_127 is one correctly rounded product, the
/// same bits on the host and every GPU (a division is the driver's to round).
const INV_127: f32 = 1.0 / 127.0;

/// u32 words per slot: the quants, then the scales two to a word.
pub fn row_words(kv_dim: usize) -> usize {
    kv_dim / 4 + kv_dim.div_ceil(2 * BLOCK)
}

/// Whether a row of `kv_dim` values can be stored (whole blocks only).
pub fn check_width(op: &'static str, backend: &'static str, kv_dim: usize) -> Result<()> {
    if kv_dim == 0 || !kv_dim.is_multiple_of(BLOCK) {
        let detail = format!("a q8_0 KV cache of kv_dim {kv_dim} (q8_0 needs a multiple of {BLOCK})");
        return Err(Error::Unsupported { op, backend, detail });
    }
    Ok(())
}

/// One block: its f16 scale bits and 32 quants.
fn encode_block(x: &[f32]) -> (u16, [i8; BLOCK]) {
    let mut q = [0i8; BLOCK];
    if x.iter().any(|v| !v.is_finite()) {
        return (half::f16::NAN.to_bits(), q);
    }
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax * INV_127;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * id).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
    (half::f16::from_f32(d).to_bits(), q)
}

/// Rows of `kv_dim` values (`values.len()` a multiple of kv_dim) as cache words.
pub fn encode(values: &[f32], kv_dim: usize) -> Vec<u32> {
    let mut words = Vec::with_capacity(values.len() / kv_dim * row_words(kv_dim));
    for row in values.chunks_exact(kv_dim) {
        let blocks: Vec<(u16, [i8; BLOCK])> = row.chunks_exact(BLOCK).map(encode_block).collect();
        for (_, q) in &blocks {
            words.extend(
                q.chunks_exact(4).map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8])),
            );
        }
        for pair in blocks.chunks(2) {
            let hi = pair.get(1).map_or(0, |b| b.0);
            words.push(pair[0].0 as u32 | (hi as u32) << 16);
        }
    }
    words
}

/// Cache words back to values: `out.len()` values (whole rows) from `words`.
pub fn decode(words: &[u32], kv_dim: usize, out: &mut [f32]) {
    let (quant_words, stride) = (kv_dim / 4, row_words(kv_dim));
    for (row, dst) in words.chunks_exact(stride).zip(out.chunks_exact_mut(kv_dim)) {
        let (quants, scales) = row.split_at(quant_words);
        for (i, v) in dst.iter_mut().enumerate() {
            let q = quants[i / 4].to_le_bytes()[i % 4] as i8;
            let b = i / BLOCK;
            let d = half::f16::from_bits((scales[b / 2] >> (16 * (b % 2))) as u16).to_f32();
            *v = q as f32 * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i / 32) as f32)).collect()
    }

    #[test]
    fn round_trip_is_within_half_a_step() {
        for kv_dim in [32, 96, 192] {
            let x = values(3 * kv_dim);
            let words = encode(&x, kv_dim);
            assert_eq!(words.len(), 3 * row_words(kv_dim));
            let mut back = vec![0.0; x.len()];
            decode(&words, kv_dim, &mut back);
            for (block, got) in x.chunks(BLOCK).zip(back.chunks(BLOCK)) {
                let d = block.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                for (a, b) in block.iter().zip(got) {
                    // Half a step, plus the f16 scale's rounding (2^-11 of each value).
                    assert!((a - b).abs() <= 0.5 * d + a.abs() / 1024.0, "kv_dim {kv_dim}: {a} read back as {b}");
                }
            }
        }
    }

    #[test]
    fn inv_127_has_the_bits_the_shader_writes() {
        assert_eq!(INV_127.to_bits(), 0x3c01_0204);
    }

    #[test]
    fn layout_is_quants_then_paired_scales() {
        let mut x = vec![0.0f32; 96];
        x[0] = 127.0; // block 0: d = 1
        x[1] = -3.0;
        x[32] = 254.0; // block 1: d = 2
        x[64] = 0.5; // block 2: d = 0.5 / 127
        let w = encode(&x, 96);
        assert_eq!(w.len(), 24 + 2);
        assert_eq!(w[0], 0x0000_fd7f); // 127, -3
        assert_eq!(w[8], 0x0000_007f); // block 1's first value: 254 / 2
        let d = |b: u32| half::f16::from_bits(b as u16).to_f32();
        assert_eq!((d(w[24]), d(w[24] >> 16)), (1.0, 2.0));
        assert_eq!(d(w[25]), half::f16::from_f32(0.5 / 127.0).to_f32());
        assert_eq!(w[25] >> 16, 0, "the odd block count pads its last scale word with zero");
    }

    #[test]
    fn a_non_finite_block_reads_back_nan() {
        let mut x = values(64);
        x[40] = f32::NAN;
        let mut back = vec![0.0; 64];
        decode(&encode(&x, 64), 64, &mut back);
        assert!(back[..32].iter().all(|v| v.is_finite()));
        assert!(back[32..].iter().all(|v| v.is_nan()));
    }
}
