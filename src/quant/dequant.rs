//! Scalar dequantizers: the reference for every kernel. One function per format, one block at a
//! time, exactly ggml's arithmetic (`dequantize_row_*` in ggml-quants.c).

use half::{bf16, f16};

use super::{Format, kquant};

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// dst = the values of `src`, a run of whole blocks of `format` holding exactly `dst.len()` values.
/// Panics if the lengths disagree: callers size both from the same row shape.
pub fn dequantize_row(format: Format, src: &[u8], dst: &mut [f32]) {
    let n_blocks = dst.len() / format.block_len();
    assert_eq!(src.len(), n_blocks * format.block_bytes(), "dequantize_row: byte count mismatch");
    let blocks = src.chunks_exact(format.block_bytes());
    let outs = dst.chunks_exact_mut(format.block_len());
    match format {
        Format::F32 => blocks.zip(outs).for_each(|(b, y)| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Format::F16 => blocks.zip(outs).for_each(|(b, y)| y[0] = f16::from_le_bytes([b[0], b[1]]).to_f32()),
        Format::BF16 => blocks.zip(outs).for_each(|(b, y)| y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        Format::Q4_0 => blocks.zip(outs).for_each(|(b, y)| q4_0(b, y)),
        Format::Q4_1 => blocks.zip(outs).for_each(|(b, y)| q4_1(b, y)),
        Format::Q5_0 => blocks.zip(outs).for_each(|(b, y)| q5_0(b, y)),
        Format::Q5_1 => blocks.zip(outs).for_each(|(b, y)| q5_1(b, y)),
        Format::Q8_0 => blocks.zip(outs).for_each(|(b, y)| q8_0(b, y)),
        Format::Q2_K => kquant::dequantize_row_q2_k(src, dst),
        Format::Q3_K => kquant::dequantize_row_q3_k(src, dst),
        Format::Q4_K => kquant::dequantize_row_q4_k(src, dst),
        Format::Q5_K => kquant::dequantize_row_q5_k(src, dst),
        Format::Q6_K => kquant::dequantize_row_q6_k(src, dst),
        Format::Intn(f) => super::intn::dequantize_block_row(f, src, dst),
    }
}

/// Q4_0: f16 d, 16 bytes of nibbles; low nibbles are values 0..16, high nibbles 16..32; x = (q - 8)·d.
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = ((q & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = q·d + m.
fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = (q & 0x0f) as f32 * d + m;
        y[j + 16] = (q >> 4) as f32 * d + m;
    }
}

/// The fifth bits of a Q5 block: bit j of the little-endian u32 belongs to value j.
fn q5_high_bits(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Q5_0: f16 d, u32 high bits, 16 bytes of nibbles; x = (q - 16)·d.
fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = q5_high_bits(&b[2..6]);
    for j in 0..16 {
        let q = b[6 + j];
        let lo = (q & 0x0f) as u32 | (((qh >> j) << 4) & 0x10);
        let hi = (q >> 4) as u32 | ((qh >> (j + 12)) & 0x10);
        y[j] = (lo as i32 - 16) as f32 * d;
        y[j + 16] = (hi as i32 - 16) as f32 * d;
    }
}

/// Q5_1: f16 d, f16 m, u32 high bits, 16 bytes of nibbles; x = q·d + m.
fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = q5_high_bits(&b[4..8]);
    for j in 0..16 {
        let q = b[8 + j];
        let lo = (q & 0x0f) as u32 | (((qh >> j) << 4) & 0x10);
        let hi = (q >> 4) as u32 | ((qh >> (j + 12)) & 0x10);
        y[j] = lo as f32 * d + m;
        y[j + 16] = hi as f32 * d + m;
    }
}

/// Q8_0: f16 d, 32 signed bytes; x = q·d.
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}
