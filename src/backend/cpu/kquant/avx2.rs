//! AVX2 k-quant kernels (see mod.rs): a chunk of 16 values is two ymm registers, simd.rs's lanes
//! 0..8 and 8..16, as in simd.rs's AVX2 dot.

use std::arch::x86_64::*;

use super::{Q2_K, Q3_K, Q5_K, Q6_K, Scales, block_bytes, chunk_bits, has_min, prefetch, scales};
use crate::backend::cpu::isa::avx2_fma;
use crate::backend::cpu::simd::avx2::reduce;
use crate::quant::kquant::QK_K;

/// 8 bytes at `p`, zero-extended to 32-bit lanes.
///
/// # Safety
/// `p` points at 8 readable bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn bytes(p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(p.cast()) })
}

/// (v >> n) & mask in every lane.
#[inline]
#[target_feature(enable = "avx2")]
fn bits(v: __m256i, n: usize, mask: i32) -> __m256i {
    _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(n as i32)), _mm256_set1_epi32(mask))
}

/// The integer levels of values 16c + 8h .. 16c + 8h + 8 of the block at `b` (half h of chunk c).
///
/// # Safety
/// `b` points at one whole block of format `F`; c < 16, h < 2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn levels<const F: u8>(b: *const u8, c: usize, h: usize) -> __m256i {
    let [low, shift, high, high_shift] = chunk_bits(F, c);
    // SAFETY: chunk_bits' offsets leave 16 bytes inside the block (the caller's contract).
    let (lo, hi) = unsafe { (bytes(b.add(low + 8 * h)), bytes(b.add(high + 8 * h))) };
    match F {
        Q2_K => bits(lo, shift, 3),
        // A clear hmask bit subtracts 4: level = low + 4·bit - 4.
        Q3_K => _mm256_sub_epi32(
            _mm256_or_si256(bits(lo, shift, 3), _mm256_slli_epi32::<2>(bits(hi, high_shift, 1))),
            _mm256_set1_epi32(4),
        ),
        Q5_K => _mm256_or_si256(bits(lo, shift, 15), _mm256_slli_epi32::<4>(bits(hi, high_shift, 1))),
        Q6_K => _mm256_sub_epi32(
            _mm256_or_si256(bits(lo, shift, 15), _mm256_slli_epi32::<4>(bits(hi, high_shift, 3))),
            _mm256_set1_epi32(32),
        ),
        _ => bits(lo, shift, 15), // Q4_K
    }
}

/// Half h of chunk c's values: fma(level, dl, -ml), the dequantizers' values (mod.rs).
///
/// # Safety
/// As [`levels`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn values<const F: u8>(b: *const u8, c: usize, h: usize, s: &Scales) -> __m256 {
    // SAFETY: the caller's contract.
    let q = _mm256_cvtepi32_ps(unsafe { levels::<F>(b, c, h) });
    let dl = _mm256_set1_ps(s.dl[c]);
    if has_min(F) { _mm256_fmadd_ps(q, dl, _mm256_set1_ps(s.neg_ml[c])) } else { _mm256_mul_ps(q, dl) }
}

/// [dot(x, row) for row in rows], each chunk of `x` loaded once for all R rows.
///
/// # Safety
/// The CPU has AVX2 and FMA; each row holds x.len() / 256 whole blocks of format `F`;
/// x.len() is a multiple of 256.
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_rows<const F: u8, const R: usize>(rows: [&[u8]; R], x: &[f32]) -> [f32; R] {
    let bb = block_bytes(F);
    let (mut lo, mut hi) = ([_mm256_setzero_ps(); R], [_mm256_setzero_ps(); R]);
    let mut s = [Scales::ZERO; R];
    for b in 0..x.len() / QK_K {
        for r in 0..R {
            prefetch::<F>(rows[r], b);
            scales::<F>(&rows[r][b * bb..(b + 1) * bb], &mut s[r]);
        }
        unrolled!(c in 0..16 => {
            // SAFETY: value 256b + 16c + 15 < x.len(), and block b exists in every row (the
            // caller's contract).
            unsafe {
                let px = x.as_ptr().add(b * QK_K + 16 * c);
                let (x0, x1) = (_mm256_loadu_ps(px), _mm256_loadu_ps(px.add(8)));
                for r in 0..R {
                    let p = rows[r].as_ptr().add(b * bb);
                    lo[r] = _mm256_fmadd_ps(values::<F>(p, c, 0, &s[r]), x0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(values::<F>(p, c, 1, &s[r]), x1, hi[r]);
                }
            }
        });
    }
    let mut out = [0.0f32; R];
    for r in 0..R {
        out[r] = reduce(lo[r], hi[r]);
    }
    out
}

/// See `super::dot_quant` (lengths checked there).
pub fn dot_quant(f: u8, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    assert!(avx2_fma() && x.len().is_multiple_of(QK_K) && rows.len() == out.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / QK_K * block_bytes(f), "kquant avx2: row length");
    }
    macro_rules! by_format {
        ($rows:expr, $r:literal) => {
            // SAFETY: the CPU has AVX2 and FMA (asserted above); lengths checked above.
            unsafe {
                match f {
                    Q2_K => dot_rows::<Q2_K, $r>($rows, x),
                    Q3_K => dot_rows::<Q3_K, $r>($rows, x),
                    Q5_K => dot_rows::<Q5_K, $r>($rows, x),
                    Q6_K => dot_rows::<Q6_K, $r>($rows, x),
                    _ => dot_rows::<{ super::Q4_K }, $r>($rows, x),
                }
            }
        };
    }
    let mut pairs = rows.chunks_exact(2);
    let mut at = 0;
    for pair in &mut pairs {
        out[at..at + 2].copy_from_slice(&by_format!([pair[0], pair[1]], 2));
        at += 2;
    }
    for &row in pairs.remainder() {
        out[at] = by_format!([row], 1)[0];
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dequantize<const F: u8>(src: &[u8], dst: &mut [f32]) {
    let bb = block_bytes(F);
    for (block, y) in src.chunks_exact(bb).zip(dst.chunks_exact_mut(QK_K)) {
        let mut s = Scales::ZERO;
        scales::<F>(block, &mut s);
        for c in 0..16 {
            for h in 0..2 {
                // SAFETY: block is one whole block; y holds 256 values, so 16c + 8h + 8 ≤ y.len().
                unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(16 * c + 8 * h), values::<F>(block.as_ptr(), c, h, &s)) };
            }
        }
    }
}

/// See `super::dequantize_row` (lengths checked there).
pub fn dequantize_row(f: u8, src: &[u8], dst: &mut [f32]) {
    assert!(avx2_fma() && src.len() / block_bytes(f) == dst.len() / QK_K);
    // SAFETY: the CPU has AVX2 and FMA (asserted above); chunks_exact keeps every block whole.
    unsafe {
        match f {
            Q2_K => dequantize::<Q2_K>(src, dst),
            Q3_K => dequantize::<Q3_K>(src, dst),
            Q5_K => dequantize::<Q5_K>(src, dst),
            Q6_K => dequantize::<Q6_K>(src, dst),
            _ => dequantize::<{ super::Q4_K }>(src, dst),
        }
    }
}
