//! AVX-512 group-wise kernels (see mod.rs): a chunk of 16 values is one zmm register, simd.rs's
//! 16 lanes.

use std::arch::x86_64::*;

use super::{INT2, INT4, INT8, NF4, NF4_DQ, bits, block_scales, chunk_at, lane_table};
use crate::backend::cpu::avx512::{AVAILABLE, reduce};
use crate::quant::intn::{Intn, NF4 as LEVELS};

/// The 16 integer levels of the chunk whose packed bits start at `p`.
///
/// # Safety
/// `p` points at the chunk's 2·bits(S) readable bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn levels<const S: u8>(p: *const u8) -> __m512i {
    if bits(S) == 8 {
        // SAFETY: 16 bytes, the caller's contract.
        return _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(p.cast()) });
    }
    let (word, shift) = lane_table::<S>();
    // Only the chunk's bits(S)/2 words are read: a masked lane never faults.
    let mask = ((1u32 << (bits(S) / 2)) - 1) as __mmask16;
    // SAFETY: the masked load reads the caller's 2·bits(S) bytes; the tables are 16 i32 each.
    let (w, word, shift) = unsafe {
        (
            _mm512_maskz_loadu_epi32(mask, p.cast()),
            _mm512_loadu_si512(word.as_ptr().cast()),
            _mm512_loadu_si512(shift.as_ptr().cast()),
        )
    };
    let v = _mm512_srlv_epi32(_mm512_permutexvar_epi32(word, w), shift);
    _mm512_and_si512(v, _mm512_set1_epi32((1 << bits(S)) - 1))
}

/// Chunk c of the block at `b`: scale·level, as the reference dequantizer computes it.
///
/// # Safety
/// `b` points at one whole block of scheme `S` holding chunk c.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn values<const S: u8>(b: *const u8, c: usize, scale: f32, z: i32) -> __m512 {
    // SAFETY: chunk c lies inside the block (the caller's contract).
    let q = unsafe { levels::<S>(b.add(chunk_at::<S>(c))) };
    let level = match S {
        INT8 | INT4 | INT2 => _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(z))),
        // SAFETY: LEVELS holds 16 floats.
        _ => _mm512_permutexvar_ps(q, unsafe { _mm512_loadu_ps(LEVELS.as_ptr()) }),
    };
    _mm512_mul_ps(level, _mm512_set1_ps(scale))
}

/// [dot(x, row) for row in rows], each chunk of `x` loaded once for all R rows.
///
/// # Safety
/// The CPU has AVX-512F and FMA; each row holds x.len() / block_len whole blocks of `f`.
#[target_feature(enable = "avx512f,fma")]
unsafe fn dot_rows<const S: u8, const R: usize>(f: Intn, rows: [&[u8]; R], x: &[f32]) -> [f32; R] {
    let (bl, bb, g) = (f.block_len(), f.block_bytes(), f.group.size());
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..x.len() / bl {
        let s: [([f32; 2], i32); R] = std::array::from_fn(|r| block_scales::<S>(&rows[r][b * bb..(b + 1) * bb]));
        for c in 0..bl / 16 {
            let h = 16 * c / g;
            // SAFETY: value b·bl + 16c + 15 < x.len(); block b exists in every row (the caller's contract).
            unsafe {
                let xv = _mm512_loadu_ps(x.as_ptr().add(b * bl + 16 * c));
                for r in 0..R {
                    let w = values::<S>(rows[r].as_ptr().add(b * bb), c, s[r].0[h], s[r].1);
                    acc[r] = _mm512_fmadd_ps(w, xv, acc[r]);
                }
            }
        }
    }
    acc.map(|v| reduce(v))
}

/// See `super::dot_quant` (lengths checked there).
pub fn dot_quant(s: u8, f: Intn, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    assert!(*AVAILABLE && x.len().is_multiple_of(f.block_len()) && rows.len() == out.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / f.block_len() * f.block_bytes(), "intn avx512: row length");
    }
    macro_rules! by_scheme {
        ($rows:expr, $r:literal) => {
            // SAFETY: the CPU has AVX-512F and FMA (asserted above); lengths checked above.
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
    if let [a, b, c, d] = rows {
        out.copy_from_slice(&by_scheme!([a, b, c, d], 4));
        return;
    }
    for (o, &row) in out.iter_mut().zip(rows) {
        *o = by_scheme!([row], 1)[0];
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn dequantize<const S: u8>(f: Intn, src: &[u8], dst: &mut [f32]) {
    let (bl, g) = (f.block_len(), f.group.size());
    for (block, y) in src.chunks_exact(f.block_bytes()).zip(dst.chunks_exact_mut(bl)) {
        let (scale, z) = block_scales::<S>(block);
        for c in 0..bl / 16 {
            // SAFETY: block is one whole block; y holds bl values, so 16c + 16 ≤ y.len().
            unsafe {
                _mm512_storeu_ps(y.as_mut_ptr().add(16 * c), values::<S>(block.as_ptr(), c, scale[16 * c / g], z))
            };
        }
    }
}

/// See `super::dequantize_row` (lengths checked there).
pub fn dequantize_row(s: u8, f: Intn, src: &[u8], dst: &mut [f32]) {
    assert!(*AVAILABLE && src.len() / f.block_bytes() == dst.len() / f.block_len());
    // SAFETY: the CPU has AVX-512F (asserted above); chunks_exact keeps every block whole.
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
