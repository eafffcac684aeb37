//! Group-wise kernels of the CPU matmul (INT8/INT4/INT2, NF4, NF4_DQ), AVX-512 (avx512.rs) or
//! AVX2 (avx2.rs):
//!
//! - [`dot_quant`]: one f32 row against 1–4 quantized weight rows, each chunk of 16 values
//!   decoded in registers and never stored (the decode, m < 4, path);
//! - [`dequantize_row`]: the values of one row (the batched path's tile fill).
//!
//! Layout: rows of whole blocks as `crate::quant::intn` lays them out. Every chunk c of 16
//! values (a block holds block_len / 16 of them, all in one group) reads as `scale·level`:
//! INT-b `d·(q - z)`, NF4 `absmax·NF4[q]`, NF4_DQ `(D·c_g)·NF4[q]`. The 2b bytes of a chunk's
//! levels are loaded as whole words, each lane picks its word (a permute) and shifts its level
//! down (a variable shift): one path for b = 2, 4 and 8.
//!
//! Launch: called per rayon task by matmul.rs, for the rows of its tile.
//!
//! Numerics: bit-identical to `quant::dequantize_row` then `simd::dot` (tests below): a value is
//! one f32 product, as in the reference (`q - z` and `D·c_g` are exact), and values are
//! fused-multiply-added in simd.rs's order (value 16c + l of the row to lane l in order of c,
//! the lanes then meet in simd.rs's tree). k is a multiple of 32, so there is no tail.

mod avx2;
mod avx512;

use half::f16;

use crate::quant::Format;
use crate::quant::intn::{HEADER_BYTES, Intn, Scheme};

/// Schemes as const-generic tags.
const INT8: u8 = 0;
const INT4: u8 = 1;
const INT2: u8 = 2;
const NF4: u8 = 3;
const NF4_DQ: u8 = 4;

fn tag(format: Format) -> Option<(u8, Intn)> {
    let Format::Intn(f) = format else { return None };
    let s = match f.scheme {
        Scheme::Int8 => INT8,
        Scheme::Int4 => INT4,
        Scheme::Int2 => INT2,
        Scheme::Nf4 => NF4,
        Scheme::Nf4Dq => NF4_DQ,
    };
    Some((s, f))
}

const fn bits(s: u8) -> usize {
    match s {
        INT8 => 8,
        INT2 => 2,
        _ => 4,
    }
}

use super::wide::{Isa, isa};

/// Whether [`dot_quant`] and [`dequantize_row`] run for `format` on this CPU.
pub fn handles(format: Format) -> bool {
    tag(format).is_some() && isa().is_some()
}

/// A block's scales and zero point: chunk c's values are `scale[16c / G]·(q - z)` (INT) or
/// `scale[16c / G]·NF4[q]` (z = 0); two scales only for NF4_DQ, whose `D·c_g` is exact.
#[inline(always)]
fn block_scales<const S: u8>(block: &[u8]) -> ([f32; 2], i32) {
    let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
    match S {
        INT8 | INT4 | INT2 => ([d; 2], block[2] as i32),
        NF4 => ([d; 2], 0),
        _ => ([d * block[2] as f32, d * block[3] as f32], 0),
    }
}

/// Byte offset of chunk c's levels in a block of scheme `S`.
#[inline(always)]
const fn chunk_at<const S: u8>(c: usize) -> usize {
    HEADER_BYTES + c * 2 * bits(S)
}

/// Per lane l of 16: the data word holding value l of a chunk, and the shift to its level.
const fn lanes(b: usize) -> ([i32; 16], [i32; 16]) {
    let (mut word, mut shift) = ([0; 16], [0; 16]);
    let mut l = 0;
    while l < 16 {
        word[l] = (b * l / 32) as i32;
        shift[l] = (b * l % 32) as i32;
        l += 1;
    }
    (word, shift)
}

const LANES: [([i32; 16], [i32; 16]); 3] = [lanes(2), lanes(4), lanes(8)];

/// The lane tables of scheme `S` (see [`lanes`]).
#[inline(always)]
const fn lane_table<const S: u8>() -> &'static ([i32; 16], [i32; 16]) {
    match bits(S) {
        2 => &LANES[0],
        4 => &LANES[1],
        _ => &LANES[2],
    }
}

/// out[r] = dot(x, dequantize(rows[r])) for 1–4 rows, bit for bit.   rows: quantized rows of k = x.len()
/// Panics unless `handles(format)`, 1 ≤ rows.len() ≤ 4, and every row holds whole blocks of k.
pub fn dot_quant(format: Format, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    let ((s, f), isa) = tag(format).zip(isa()).expect("intn::dot_quant: format or CPU not supported");
    assert!(x.len().is_multiple_of(f.block_len()) && (1..=4).contains(&rows.len()) && out.len() == rows.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / f.block_len() * f.block_bytes(), "intn::dot_quant: row length");
    }
    match isa {
        Isa::Avx512 => avx512::dot_quant(s, f, rows, x, out),
        Isa::Avx2 => avx2::dot_quant(s, f, rows, x, out),
    }
}

/// dst = the values of one quantized row, bit-identical to `quant::dequantize_row`. Panics
/// unless `handles(format)` and src holds the whole blocks of dst.len() values.
pub fn dequantize_row(format: Format, src: &[u8], dst: &mut [f32]) {
    let ((s, f), isa) = tag(format).zip(isa()).expect("intn::dequantize_row: format or CPU not supported");
    assert!(
        dst.len().is_multiple_of(f.block_len()) && src.len() == dst.len() / f.block_len() * f.block_bytes(),
        "intn::dequantize_row: lengths"
    );
    match isa {
        Isa::Avx512 => avx512::dequantize_row(s, f, src, dst),
        Isa::Avx2 => avx2::dequantize_row(s, f, src, dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::simd::noise;
    use crate::backend::cpu::simd::portable;
    use crate::quant::dequantize_row as reference;
    use crate::quant::intn::ALL;

    /// Random rows: every bit random but the f16 scale, kept finite and of both signs.
    fn rows(f: Intn, n: usize, k: usize) -> Vec<u8> {
        let mut bytes = noise(n * Format::Intn(f).row_bytes(k).unwrap(), f.type_id() as u64);
        for block in bytes.chunks_exact_mut(f.block_bytes()) {
            block[1] &= 0xbb;
        }
        bytes
    }

    /// Both ISAs' kernels (where this CPU has them) equal the reference dequantizer followed
    /// by the portable dot, bit for bit, for every format and 1–4 rows.
    #[test]
    fn fused_and_dequantize_equal_reference_then_dot() {
        let k = 3 * 256;
        let have = [(Isa::Avx512, *super::super::avx512::AVAILABLE), (Isa::Avx2, super::super::isa::avx2_fma())];
        for f in ALL {
            let (s, _) = tag(Format::Intn(f)).unwrap();
            let bytes = rows(f, 4, k);
            let rows: Vec<&[u8]> = bytes.chunks_exact(Format::Intn(f).row_bytes(k).unwrap()).collect();
            let x: Vec<f32> = noise(k, 7).iter().map(|&b| b as f32 / 127.5 - 1.0).collect();
            let mut values = vec![vec![0.0f32; k]; 4];
            for (v, row) in values.iter_mut().zip(&rows) {
                reference(Format::Intn(f), row, v);
            }
            let expected: Vec<u32> = values.iter().map(|v| portable::dot(&x, v).to_bits()).collect();
            for (isa, present) in have {
                if !present {
                    eprintln!("skipping {isa:?}: not on this CPU");
                    continue;
                }
                let name = format!("{} {isa:?}", f.name());
                for (row, v) in rows.iter().zip(&values) {
                    let mut got = vec![0.0f32; k];
                    match isa {
                        Isa::Avx512 => avx512::dequantize_row(s, f, row, &mut got),
                        Isa::Avx2 => avx2::dequantize_row(s, f, row, &mut got),
                    }
                    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(v), "{name} dequantize");
                }
                for n in 1..=4 {
                    let mut got = vec![0.0f32; n];
                    match isa {
                        Isa::Avx512 => avx512::dot_quant(s, f, &rows[4 - n..], &x, &mut got),
                        Isa::Avx2 => avx2::dot_quant(s, f, &rows[4 - n..], &x, &mut got),
                    }
                    assert_eq!(
                        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        expected[4 - n..],
                        "{name} fused x{n}"
                    );
                }
            }
        }
    }
}
