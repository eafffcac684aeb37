//! AVX-512 k-quant kernels (see mod.rs): one zmm register is one chunk of 16 values, exactly
//! simd.rs's 16 lanes.

use std::arch::x86_64::*;

use super::{Q2_K, Q3_K, Q5_K, Q6_K, Scales, block_bytes, chunk_bits, has_min, prefetch, scales};
use crate::backend::cpu::avx512::reduce;
use crate::quant::kquant::QK_K;

/// 16 bytes at `p`, zero-extended to 32-bit lanes.
///
/// # Safety
/// `p` points at 16 readable bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn bytes(p: *const u8) -> __m512i {
    // SAFETY: the caller's contract.
    _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(p.cast()) })
}

/// (v >> n) & mask in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn bits(v: __m512i, n: usize, mask: i32) -> __m512i {
    _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(n as i32)), _mm512_set1_epi32(mask))
}

/// The integer levels of chunk c (values 16c..16c + 16) of the block at `b`.
///
/// # Safety
/// `b` points at one whole block of format `F`; c < 16.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn levels<const F: u8>(b: *const u8, c: usize) -> __m512i {
    let [low, shift, high, high_shift] = chunk_bits(F, c);
    // SAFETY: chunk_bits' offsets leave 16 bytes inside the block (the caller's contract).
    let (lo, hi) = unsafe { (bytes(b.add(low)), bytes(b.add(high))) };
    match F {
        Q2_K => bits(lo, shift, 3),
        // A clear hmask bit subtracts 4: level = low + 4·bit - 4.
        Q3_K => _mm512_sub_epi32(
            _mm512_or_si512(bits(lo, shift, 3), _mm512_slli_epi32::<2>(bits(hi, high_shift, 1))),
            _mm512_set1_epi32(4),
        ),
        Q5_K => _mm512_or_si512(bits(lo, shift, 15), _mm512_slli_epi32::<4>(bits(hi, high_shift, 1))),
        Q6_K => _mm512_sub_epi32(
            _mm512_or_si512(bits(lo, shift, 15), _mm512_slli_epi32::<4>(bits(hi, high_shift, 3))),
            _mm512_set1_epi32(32),
        ),
        _ => bits(lo, shift, 15), // Q4_K
    }
}

/// Chunk c's values: fma(level, dl, -ml), the dequantizers' values (mod.rs).
///
/// # Safety
/// As [`levels`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn values<const F: u8>(b: *const u8, c: usize, s: &Scales) -> __m512 {
    // SAFETY: the caller's contract.
    let q = _mm512_cvtepi32_ps(unsafe { levels::<F>(b, c) });
    let dl = _mm512_set1_ps(s.dl[c]);
    if has_min(F) { _mm512_fmadd_ps(q, dl, _mm512_set1_ps(s.neg_ml[c])) } else { _mm512_mul_ps(q, dl) }
}

/// Chunks 2j and 2j + 1 (one sub-block of Q4_K/Q5_K, two of the others) of the block at `b`.
/// Q4_K looks its values up in a 16-entry table, [`values`]' value for each q = 0..16
/// (vpermps reads only an index's low 4 bits, so the nibbles need no mask).
///
/// # Safety
/// `b` points at one whole block of format `F`; j < 8.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pair<const F: u8>(b: *const u8, j: usize, s: &Scales) -> [__m512; 2] {
    if F == super::Q4_K {
        let iota = _mm512_setr_ps(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0);
        let table = _mm512_fmadd_ps(iota, _mm512_set1_ps(s.dl[2 * j]), _mm512_set1_ps(s.neg_ml[2 * j]));
        let [at, shift, ..] = chunk_bits(F, 2 * j);
        // SAFETY: chunk_bits' offsets leave 32 bytes (chunks 2j and 2j + 1) inside the block.
        let (q0, q1) = unsafe { (bytes(b.add(at)), bytes(b.add(at + 16))) };
        let n = _mm_cvtsi32_si128(shift as i32);
        return [
            _mm512_permutexvar_ps(_mm512_srl_epi32(q0, n), table),
            _mm512_permutexvar_ps(_mm512_srl_epi32(q1, n), table),
        ];
    }
    // SAFETY: the caller's contract.
    unsafe { [values::<F>(b, 2 * j, s), values::<F>(b, 2 * j + 1, s)] }
}

/// [dot(x, row) for row in rows], each chunk of `x` loaded once for all R rows, whose R
/// independent accumulator chains hide the multiply-add latency.
///
/// # Safety
/// Each row holds x.len() / 256 whole blocks of format `F`; x.len() is a multiple of 256.
#[target_feature(enable = "avx512f")]
unsafe fn dot_rows<const F: u8, const R: usize>(rows: [&[u8]; R], x: &[f32]) -> [f32; R] {
    let bb = block_bytes(F);
    let mut acc = [_mm512_setzero_ps(); R];
    let mut s = [Scales::ZERO; R];
    for b in 0..x.len() / QK_K {
        for r in 0..R {
            prefetch::<F>(rows[r], b);
            scales::<F>(&rows[r][b * bb..(b + 1) * bb], &mut s[r]);
        }
        unrolled!(j in 0..8 => {
            // SAFETY: value 256b + 32j + 31 < x.len(), and block b exists in every row (the
            // caller's contract).
            unsafe {
                let px = x.as_ptr().add(b * QK_K + 32 * j);
                let (x0, x1) = (_mm512_loadu_ps(px), _mm512_loadu_ps(px.add(16)));
                for r in 0..R {
                    let [w0, w1] = pair::<F>(rows[r].as_ptr().add(b * bb), j, &s[r]);
                    acc[r] = _mm512_fmadd_ps(w0, x0, acc[r]);
                    acc[r] = _mm512_fmadd_ps(w1, x1, acc[r]);
                }
            }
        });
    }
    let mut out = [0.0f32; R];
    for r in 0..R {
        out[r] = reduce(acc[r]);
    }
    out
}

/// See `super::dot_quant` (lengths checked there).
pub fn dot_quant(f: u8, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    assert!(*crate::backend::cpu::avx512::AVAILABLE && x.len().is_multiple_of(QK_K) && rows.len() == out.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / QK_K * block_bytes(f), "kquant avx512: row length");
    }
    macro_rules! by_format {
        ($rows:expr, $r:literal) => {
            // SAFETY: the CPU has AVX-512F (asserted above); lengths checked above.
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
    if let [a, b, c, d] = *rows {
        out.copy_from_slice(&by_format!([a, b, c, d], 4));
    } else {
        for (o, &row) in out.iter_mut().zip(rows) {
            *o = by_format!([row], 1)[0];
        }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn dequantize<const F: u8>(src: &[u8], dst: &mut [f32]) {
    let bb = block_bytes(F);
    for (block, y) in src.chunks_exact(bb).zip(dst.chunks_exact_mut(QK_K)) {
        let mut s = Scales::ZERO;
        scales::<F>(block, &mut s);
        for j in 0..8 {
            // SAFETY: block is one whole block; y holds 256 values, so 32j + 32 ≤ y.len().
            unsafe {
                let [w0, w1] = pair::<F>(block.as_ptr(), j, &s);
                _mm512_storeu_ps(y.as_mut_ptr().add(32 * j), w0);
                _mm512_storeu_ps(y.as_mut_ptr().add(32 * j + 16), w1);
            }
        }
    }
}

/// See `super::dequantize_row` (lengths checked there).
pub fn dequantize_row(f: u8, src: &[u8], dst: &mut [f32]) {
    assert!(*crate::backend::cpu::avx512::AVAILABLE && src.len() / block_bytes(f) == dst.len() / QK_K);
    // SAFETY: the CPU has AVX-512F (asserted above); chunks_exact keeps every block whole.
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
