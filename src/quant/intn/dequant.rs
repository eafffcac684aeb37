//! Reference dequantizers of the group-wise formats (layout in mod.rs): one block at a time, the
//! arithmetic every kernel must reproduce.

use half::f16;

use super::{HEADER_BYTES, Intn, NF4, Scheme};

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The b-bit value i of a block's packed data (value i at bit b·i, little-endian).
pub(super) fn unpack(data: &[u8], bits: usize, i: usize) -> u8 {
    let at = bits * i;
    (data[at / 8] >> (at % 8)) & ((1u16 << bits) - 1) as u8
}

/// dst = the values of `src`, whole blocks of `f` holding exactly dst.len() values.
/// Panics if the lengths disagree: callers size both from the same row shape.
pub fn dequantize_block_row(f: Intn, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() / f.block_len() * f.block_bytes(), "intn dequantize: byte count mismatch");
    for (b, y) in src.chunks_exact(f.block_bytes()).zip(dst.chunks_exact_mut(f.block_len())) {
        block(f, b, y);
    }
}

/// One block: INT-b `d·(q - z)`, NF4 `absmax·NF4[q]`, NF4_DQ `(D·c_g)·NF4[q]`.
pub(super) fn block(f: Intn, b: &[u8], y: &mut [f32]) {
    let data = &b[HEADER_BYTES..];
    let bits = f.scheme.bits();
    match f.scheme {
        Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
            let (d, z) = (f16_at(b, 0), b[2] as i32);
            for (i, y) in y.iter_mut().enumerate() {
                *y = d * (unpack(data, bits, i) as i32 - z) as f32;
            }
        }
        Scheme::Nf4 => {
            let absmax = f16_at(b, 0);
            for (i, y) in y.iter_mut().enumerate() {
                *y = absmax * NF4[unpack(data, 4, i) as usize];
            }
        }
        Scheme::Nf4Dq => {
            let d = f16_at(b, 0);
            let g = f.group.size();
            for (i, y) in y.iter_mut().enumerate() {
                let scale = d * b[2 + i / g] as f32;
                *y = scale * NF4[unpack(data, 4, i) as usize];
            }
        }
    }
}
