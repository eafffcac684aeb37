//! AVX2 group-wise kernels (see mod.rs): a chunk of 16 values is two ymm registers, simd.rs's
//! lanes 0..8 and 8..16, as in simd.rs's AVX2 dot.

use std::arch::x86_64::*;

use super::{INT2, INT4, INT8, NF4, NF4_DQ, bits, block_scales, chunk_at, lane_table};
use crate::backend::cpu::isa::avx2_fma;
use crate::backend::cpu::simd::avx2::reduce;
use crate::quant::intn::{Intn, NF4 as LEVELS};

/// The integer levels of values 8h .. 8h + 8 of the chunk whose packed bits start at `p`.
///
/// # Safety
/// `p` points at the chunk's 2·bits(S) readable bytes; h < 2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn levels<const S: u8>(p: *const u8, h: usize) -> __m256i {
    if bits(S) == 8 {
        // SAFETY: bytes 8h .. 8h + 8 of the chunk's 16, the caller's contract.
        return _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(p.add(8 * h).cast()) });
    }
    let (word, shift) = lane_table::<S>();
    let n_words = (bits(S) / 2) as i32;
    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_words), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // SAFETY: the masked load reads only the chunk's bits(S)/2 words (a masked lane never faults);
    // the tables hold 16 i32, so lanes 8h .. 8h + 8 are in range.
    let (w, word, shift) = unsafe {
        (
            _mm256_maskload_epi32(p.cast(), mask),
            _mm256_loadu_si256(word.as_ptr().add(8 * h).cast()),
            _mm256_loadu_si256(shift.as_ptr().add(8 * h).cast()),
        )
    };
    let v = _mm256_srlv_epi32(_mm256_permutevar8x32_epi32(w, word), shift);
    _mm256_and_si256(v, _mm256_set1_epi32((1 << bits(S)) - 1))
}

/// Values 8h .. 8h + 8 of chunk c of the block at `b`: scale·level, as the reference computes it.
///
/// # Safety
/// `b` points at one whole block of scheme `S` holding chunk c; h < 2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn values<const S: u8>(b: *const u8, c: usize, h: usize, scale: f32, z: i32) -> __m256 {
    // SAFETY: chunk c lies inside the block (the caller's contract).
    let q = unsafe { levels::<S>(b.add(chunk_at::<S>(c)), h) };
    let level = match S {
        INT8 | INT4 | INT2 => _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(z))),
        _ => {
            // Levels 0..8 and 8..16 looked up by q's low 3 bits; q's bit 3 (moved to the sign) picks.
            // SAFETY: LEVELS holds 16 floats.
            let (lo, hi) = unsafe { (_mm256_loadu_ps(LEVELS.as_ptr()), _mm256_loadu_ps(LEVELS.as_ptr().add(8))) };
            let pick = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(q));
            _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, q), _mm256_permutevar8x32_ps(hi, q), pick)
        }
    };
    _mm256_mul_ps(level, _mm256_set1_ps(scale))
}

/// [dot(x, row) for row in rows], each chunk of `x` loaded once for all R rows.
///
/// # Safety
/// The CPU has AVX2 and FMA; each row holds x.len() / block_len whole blocks of `f`.
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_rows<const S: u8, const R: usize>(f: Intn, rows: [&[u8]; R], x: &[f32]) -> [f32; R] {
    let (bl, bb, g) = (f.block_len(), f.block_bytes(), f.group.size());
    let (mut lo, mut hi) = ([_mm256_setzero_ps(); R], [_mm256_setzero_ps(); R]);
    for b in 0..x.len() / bl {
        let s: [([f32; 2], i32); R] = std::array::from_fn(|r| block_scales::<S>(&rows[r][b * bb..(b + 1) * bb]));
        for c in 0..bl / 16 {
            let h = 16 * c / g;
            // SAFETY: value b·bl + 16c + 15 < x.len(); block b exists in every row (the caller's contract).
            unsafe {
                let px = x.as_ptr().add(b * bl + 16 * c);
                let (x0, x1) = (_mm256_loadu_ps(px), _mm256_loadu_ps(px.add(8)));
                for r in 0..R {
                    let p = rows[r].as_ptr().add(b * bb);
                    let (scale, z) = (s[r].0[h], s[r].1);
                    lo[r] = _mm256_fmadd_ps(values::<S>(p, c, 0, scale, z), x0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(values::<S>(p, c, 1, scale, z), x1, hi[r]);
                }
            }
        }
    }
    std::array::from_fn(|r| reduce(lo[r], hi[r]))
}

/// See `super::dot_quant` (lengths checked there).
pub fn dot_quant(s: u8, f: Intn, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    assert!(avx2_fma() && x.len().is_multiple_of(f.block_len()) && rows.len() == out.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / f.block_len() * f.block_bytes(), "intn avx2: row length");
    }
    macro_rules! by_scheme {
        ($rows:expr, $r:literal) => {
            // SAFETY: the CPU has AVX2 and FMA (asserted above); lengths checked above.
            unsafe {
                match s {
                    INT8 => dot_rows::<INT8, $r>(f, $rows, x),
                    INT4 => dot_rows::<INT4, $r>(f, $rows, x),
                    INT2 => dot_rows::<INT2, $r>(f, $rows, x),
                    NF4 => dot_rows::<NF4, $r>(f, $rows, x),
                    _ => dot_rows::<NF4_DQ, $r>(f, $rows, x),
                }
            }
        };
    }
    let mut pairs = rows.chunks_exact(2);
    let mut at = 0;
    for pair in &mut pairs {
        out[at..at + 2].copy_from_slice(&by_scheme!([pair[0], pair[1]], 2));
        at += 2;
    }
    for &row in pairs.remainder() {
        out[at] = by_scheme!([row], 1)[0];
    }
}

#[target_feature(enable = "avx2")]
unsafe fn dequantize<const S: u8>(f: Intn, src: &[u8], dst: &mut [f32]) {
    let (bl, g) = (f.block_len(), f.group.size());
    for (block, y) in src.chunks_exact(f.block_bytes()).zip(dst.chunks_exact_mut(bl)) {
        let (scale, z) = block_scales::<S>(block);
        for c in 0..bl / 16 {
            for h in 0..2 {
                // SAFETY: block is one whole block; y holds bl values, so 16c + 8h + 8 ≤ y.len().
                unsafe {
                    let v = values::<S>(block.as_ptr(), c, h, scale[16 * c / g], z);
                    _mm256_storeu_ps(y.as_mut_ptr().add(16 * c + 8 * h), v);
                }
            }
        }
    }
}

/// See `super::dequantize_row` (lengths checked there).
pub fn dequantize_row(s: u8, f: Intn, src: &[u8], dst: &mut [f32]) {
    assert!(avx2_fma() && src.len() / f.block_bytes() == dst.len() / f.block_len());
    // SAFETY: the CPU has AVX2 (asserted above); chunks_exact keeps every block whole.
    unsafe {
        match s {
            INT8 => dequantize::<INT8>(f, src, dst),
            INT4 => dequantize::<INT4>(f, src, dst),
            INT2 => dequantize::<INT2>(f, src, dst),
            NF4 => dequantize::<NF4>(f, src, dst),
            _ => dequantize::<NF4_DQ>(f, src, dst),
        }
    }
}
