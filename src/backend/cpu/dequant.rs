//! Row dequantizers for the matmul hot path: the arithmetic of `crate::quant::dequantize_row`
//! (bit-identical values, checked by the test below), written over fixed-size block arrays so
//! LLVM drops the bounds checks and vectorizes. Formats without a fast version use the reference.

use half::f16;

use crate::quant::{Format, dequantize_row};

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// dst = the values of one row; `src` holds exactly dst.len() / block_len blocks.
pub fn dequantize_row_fast(format: Format, src: &[u8], dst: &mut [f32]) {
    let blocks = src.chunks_exact(format.block_bytes());
    let outs = dst.chunks_exact_mut(32);
    match format {
        Format::Q4_0 => blocks.zip(outs).for_each(|(b, y)| q4_0(b.try_into().unwrap(), y.try_into().unwrap())),
        Format::Q4_1 => blocks.zip(outs).for_each(|(b, y)| q4_1(b.try_into().unwrap(), y.try_into().unwrap())),
        Format::Q8_0 => blocks.zip(outs).for_each(|(b, y)| q8_0(b.try_into().unwrap(), y.try_into().unwrap())),
        Format::F32 | Format::F16 | Format::BF16 | Format::Q5_0 | Format::Q5_1 => dequantize_row(format, src, dst),
        // The k-quants' reference dequantizers are already loops over fixed-size blocks.
        Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K => dequantize_row(format, src, dst),
        Format::Intn(_) => dequantize_row(format, src, dst),
    }
}

/// x = (q - 8)·d; low nibbles are values 0..16, high nibbles 16..32.
fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qs: &[u8; 16] = b[2..].try_into().unwrap();
    for j in 0..16 {
        y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// x = q·d + m.
fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs: &[u8; 16] = b[4..].try_into().unwrap();
    for j in 0..16 {
        y[j] = (qs[j] & 0x0f) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// x = q·d.
fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qs: &[u8; 32] = b[2..].try_into().unwrap();
    for j in 0..32 {
        y[j] = qs[j] as i8 as f32 * d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_dequant_equals_reference_bit_for_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for format in Format::ALL {
            let cols = 256;
            let mut bytes: Vec<u8> = (0..format.row_bytes(cols).unwrap())
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            if format.is_quantized() {
                // Finite f16 scales (random bytes may spell NaN, whose payload is not the point).
                for block in bytes.chunks_exact_mut(format.block_bytes()) {
                    block[1] &= 0x3b;
                    block[3] &= 0x3b;
                }
            }
            let (mut fast, mut reference) = (vec![0.0; cols], vec![0.0; cols]);
            dequantize_row_fast(format, &bytes, &mut fast);
            dequantize_row(format, &bytes, &mut reference);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&reference), "{}", format.name());
        }
    }
}
