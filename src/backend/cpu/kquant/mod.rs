//! k-quant kernels of the CPU matmul (Q2_K … Q6_K), AVX-512 (avx512.rs) or AVX2 (avx2.rs):
//!
//! - [`dot_quant`]: one f32 row against 1–4 quantized weight rows, each super-block decoded in
//!   registers and never stored (the decode, m < 4, path);
//! - [`dequantize_row`]: the values of one row (the batched path's tile fill).
//!
//! Layout: rows of whole 256-value super-blocks as GGUF stores them (`crate::quant::kquant`).
//! Every format reads as `dl[c]·level - ml[c]` per chunk c of 16 values: [`Scales`] holds one
//! super-block's `dl = d·sc` and `ml = dmin·m` per chunk (once per block and row, as the
//! dequantizers compute them), and each ISA file extracts a chunk's integer levels from the
//! packed bits, the only part that differs between formats.
//!
//! Launch: called per rayon task by matmul.rs, for the rows of its tile.
//!
//! Numerics: bit-identical to `quant::dequantize_row` then `simd::dot` (tests below). The
//! dequantizers round `(d·sc)·q` and then subtract `dmin·m`; here a value is
//! `fma(q, d·sc, -(dmin·m))`, the same bits: `d·sc`, `(d·sc)·q` and `dmin·m` are exact in f32 (an
//! f16's 11 significant bits times integers below 2^11 fit in 24), so the only rounding either
//! way is the subtraction's. The values are fused-multiply-added in simd.rs's order (value
//! 16c + l of the row to lane l in order of c, the lanes then meet in simd.rs's tree). k is a
//! multiple of 256, so there is no tail.

/// `$body` once for each `$i` in 0..8 or 0..16 with `$i` a literal, so chunk offsets and shifts
/// fold to constants (as a counted loop, which LLVM left rolled, they were variable shifts).
macro_rules! unrolled {
    ($i:ident in 0..8 => $body:block) => { unrolled!(@ $i $body; 0 1 2 3 4 5 6 7) };
    ($i:ident in 0..16 => $body:block) => { unrolled!(@ $i $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15) };
    (@ $i:ident $body:block; $($n:literal)*) => { $({ let $i: usize = $n; $body })* };
}

mod avx2;
mod avx512;

use half::f16;

use crate::quant::Format;
use crate::quant::kquant::{QK_K, q3_k_scale, q4_k_scale_min};

/// Formats as const-generic tags.
const Q2_K: u8 = 0;
const Q3_K: u8 = 1;
const Q4_K: u8 = 2;
const Q5_K: u8 = 3;
const Q6_K: u8 = 4;

fn tag(format: Format) -> Option<u8> {
    match format {
        Format::Q2_K => Some(Q2_K),
        Format::Q3_K => Some(Q3_K),
        Format::Q4_K => Some(Q4_K),
        Format::Q5_K => Some(Q5_K),
        Format::Q6_K => Some(Q6_K),
        _ => None,
    }
}

const fn block_bytes(f: u8) -> usize {
    match f {
        Q2_K => 84,
        Q3_K => 110,
        Q4_K => 144,
        Q5_K => 176,
        _ => 210,
    }
}

/// How many super-blocks ahead the fused kernels prefetch each row: a block of four rows is
/// several hundred instructions, more than the out-of-order window looks ahead.
const PREFETCH_BLOCKS: usize = 2;

/// Prefetches super-block `b + PREFETCH_BLOCKS` of a row of format `F`, one touch per 64 bytes
/// (a prefetch never faults, so past the row's end it is only wasted).
#[inline(always)]
fn prefetch<const F: u8>(row: &[u8], b: usize) {
    let p = row.as_ptr().wrapping_add((b + PREFETCH_BLOCKS) * block_bytes(F));
    for line in 0..block_bytes(F).div_ceil(64) {
        // SAFETY: a prefetch reads nothing architecturally and cannot fault.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(64 * line).cast())
        };
    }
}

/// Whether values carry a min (`- ml`); Q3_K and Q6_K are `dl·level` alone.
const fn has_min(f: u8) -> bool {
    matches!(f, Q2_K | Q4_K | Q5_K)
}

use super::wide::{Isa, isa};

/// Whether [`dot_quant`] and [`dequantize_row`] run for `format` on this CPU.
pub fn handles(format: Format) -> bool {
    tag(format).is_some() && isa().is_some()
}

/// One super-block's scales per chunk of 16 values: chunk c is `fma(level, dl[c], neg_ml[c])`.
#[derive(Clone, Copy)]
struct Scales {
    dl: [f32; 16],
    neg_ml: [f32; 16],
}

impl Scales {
    const ZERO: Scales = Scales { dl: [0.0; 16], neg_ml: [0.0; 16] };
}

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// s = the chunk scales of `block` (one whole super-block of format `F`), each product as the
/// dequantizers compute it: `d·sc` and `dmin·m` in f32 (exact). The integer scales come out
/// first so the 32 products vectorize; `s` is filled in place, the hot loop's copies showed.
#[inline(always)]
fn scales<const F: u8>(block: &[u8], s: &mut Scales) {
    let (mut sc, mut m) = ([0i32; 16], [0i32; 16]);
    let (d, dmin) = match F {
        Q2_K => (f16_at(block, 80), f16_at(block, 82)),
        Q3_K => (f16_at(block, 108), 0.0),
        Q4_K | Q5_K => (f16_at(block, 0), f16_at(block, 2)),
        _ => (f16_at(block, 208), 0.0),
    };
    match F {
        Q2_K => {
            for c in 0..16 {
                (sc[c], m[c]) = ((block[c] & 0xf) as i32, (block[c] >> 4) as i32);
            }
        }
        Q3_K => {
            for (c, sc) in sc.iter_mut().enumerate() {
                *sc = q3_k_scale(&block[96..108], c);
            }
        }
        Q4_K | Q5_K => {
            for j in 0..8 {
                let (a, b) = q4_k_scale_min(&block[4..16], j);
                (sc[2 * j], sc[2 * j + 1], m[2 * j], m[2 * j + 1]) = (a as i32, a as i32, b as i32, b as i32);
            }
        }
        _ => {
            for (sc, &b) in sc.iter_mut().zip(&block[192..208]) {
                *sc = b as i8 as i32;
            }
        }
    }
    for c in 0..16 {
        s.dl[c] = d * sc[c] as f32;
        s.neg_ml[c] = -(dmin * m[c] as f32);
    }
}

/// Where chunk c's bytes start in a block, and the shifts that bring its levels to bit 0:
/// `(low, shift)` for the low bits (2 of Q2_K/Q3_K, 4 of Q4_K/Q5_K/Q6_K; a Q4_K/Q5_K shift of 4
/// takes the high nibble) and `(high, high_shift)` for Q3_K's hmask bit, Q5_K's fifth bit and
/// Q6_K's top two bits. Offsets per the layouts in `crate::quant::kquant`; each chunk's 16 bytes
/// lie inside the block.
#[inline(always)]
const fn chunk_bits(f: u8, c: usize) -> [usize; 4] {
    let l = 16 * (c % 2);
    match f {
        Q2_K => [16 + 32 * (c / 8) + l, 2 * ((c % 8) / 2), 0, 0],
        Q3_K => [32 + 32 * (c / 8) + l, 2 * ((c % 8) / 2), l, c / 2],
        Q4_K => [16 + 32 * (c / 4) + l, 4 * ((c % 4) / 2), 0, 0],
        Q5_K => [48 + 32 * (c / 4) + l, 4 * ((c % 4) / 2), 16 + l, c / 2],
        _ => {
            let (h, k) = (c / 8, (c % 8) / 2);
            [64 * h + 32 * (k % 2) + l, 4 * (k / 2), 128 + 32 * h + l, 2 * k]
        }
    }
}

/// out[r] = dot(x, dequantize(rows[r])) for 1–4 rows, bit for bit.   rows: quantized rows of k = x.len()
/// Panics unless `handles(format)`, 1 ≤ rows.len() ≤ 4, and every row holds k / 256 blocks.
pub fn dot_quant(format: Format, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    let (f, isa) = tag(format).zip(isa()).expect("kquant::dot_quant: format or CPU not supported");
    assert!(x.len().is_multiple_of(QK_K) && (1..=4).contains(&rows.len()) && out.len() == rows.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / QK_K * block_bytes(f), "kquant::dot_quant: row length");
    }
    match isa {
        Isa::Avx512 => avx512::dot_quant(f, rows, x, out),
        Isa::Avx2 => avx2::dot_quant(f, rows, x, out),
    }
}

/// dst = the values of one quantized row, bit-identical to `quant::dequantize_row`. Panics
/// unless `handles(format)` and src holds dst.len() / 256 blocks.
pub fn dequantize_row(format: Format, src: &[u8], dst: &mut [f32]) {
    let (f, isa) = tag(format).zip(isa()).expect("kquant::dequantize_row: format or CPU not supported");
    assert!(
        dst.len().is_multiple_of(QK_K) && src.len() == dst.len() / QK_K * block_bytes(f),
        "kquant::dequantize_row: lengths"
    );
    match isa {
        Isa::Avx512 => avx512::dequantize_row(f, src, dst),
        Isa::Avx2 => avx2::dequantize_row(f, src, dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::simd::noise;
    use crate::backend::cpu::simd::portable;
    use crate::quant::dequantize_row as reference;

    /// Random k-quant rows: every bit random but the f16 super-block scales, kept finite and
    /// of both signs (a NaN's payload is not the point).
    fn rows(format: Format, n: usize, k: usize) -> Vec<u8> {
        let mut bytes = noise(n * format.row_bytes(k).unwrap(), format.ggml_id() as u64);
        for block in bytes.chunks_exact_mut(format.block_bytes()) {
            for field in format.fields().iter().filter(|f| f.name == "d" || f.name == "dm") {
                for at in (field.start..field.end).step_by(2) {
                    block[at + 1] &= 0xbb;
                }
            }
        }
        bytes
    }

    /// Both ISAs' kernels (where this CPU has them) equal the reference dequantizer followed
    /// by the portable dot, bit for bit, for every format and 1–4 rows.
    #[test]
    fn fused_and_dequantize_equal_reference_then_dot() {
        let k = 3 * QK_K;
        let have = [(Isa::Avx512, *super::super::avx512::AVAILABLE), (Isa::Avx2, super::super::isa::avx2_fma())];
        for format in [Format::Q2_K, Format::Q3_K, Format::Q4_K, Format::Q5_K, Format::Q6_K] {
            let f = tag(format).unwrap();
            let bytes = rows(format, 4, k);
            let rows: Vec<&[u8]> = bytes.chunks_exact(format.row_bytes(k).unwrap()).collect();
            let x: Vec<f32> = noise(k, 7).iter().map(|&b| b as f32 / 127.5 - 1.0).collect();
            let mut values = vec![vec![0.0f32; k]; 4];
            for (v, row) in values.iter_mut().zip(&rows) {
                reference(format, row, v);
            }
            let expected: Vec<u32> = values.iter().map(|v| portable::dot(&x, v).to_bits()).collect();
            for (isa, present) in have {
                if !present {
                    eprintln!("skipping {isa:?}: not on this CPU");
                    continue;
                }
                let name = format!("{} {isa:?}", format.name());
                for (row, v) in rows.iter().zip(&values) {
                    let mut got = vec![0.0f32; k];
                    match isa {
                        Isa::Avx512 => avx512::dequantize_row(f, row, &mut got),
                        Isa::Avx2 => avx2::dequantize_row(f, row, &mut got),
                    }
                    assert_eq!(
                        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        v.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{name} dequantize"
                    );
                }
                for n in 1..=4 {
                    let mut got = vec![0.0f32; n];
                    match isa {
                        Isa::Avx512 => avx512::dot_quant(f, &rows[4 - n..], &x, &mut got),
                        Isa::Avx2 => avx2::dot_quant(f, &rows[4 - n..], &x, &mut got),
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
