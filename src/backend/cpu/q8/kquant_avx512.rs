//! AVX-512 decoding of one k-quant chunk (64 values: reference.rs's `unpack_kquant_chunk`) into
//! lane order [b0 0..16, b1 0..16, b0 16..32, b1 16..32] (mod.rs), for avx512.rs's kernels.
//!
//! The bytes of both 32-value halves of a chunk sit side by side in the super-block (Q4_K/Q5_K:
//! the low and high nibbles of the same 32 bytes; Q6_K: two runs of 32 bytes), so one 128-bit
//! lane shuffle puts them in lane order and shifts by a per-lane count pick the bits: no byte
//! permute. The scales come per chunk from the super-block's header.

use std::arch::x86_64::*;

use super::tags::{Q5_K, Q6_K};
use crate::quant::kquant::q4_k_scale_min;

/// 128-bit lanes [t0, t0, t1, t1] of a 256-bit [t0, t1].
#[inline(always)]
unsafe fn doubled(t: __m256i) -> __m512i {
    // SAFETY: register arithmetic only.
    unsafe {
        let v = _mm512_castsi256_si512(t);
        _mm512_shuffle_i64x2::<0b01_01_00_00>(v, v)
    }
}

/// Bits s0..s0 + n of the bytes of 128-bit lanes 0 and 2, bits s1.. of lanes 1 and 3 (`mask`
/// keeps n bits).
#[inline(always)]
unsafe fn bits_of(v: __m512i, s0: u16, s1: u16, mask: i8) -> __m512i {
    // SAFETY: register arithmetic only.
    unsafe {
        let (a, b) = (s0 as i16, s1 as i16);
        let counts = _mm512_set_epi16(
            b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a,
        );
        // A 16-bit shift moves the high byte's low bits into the low byte's top bits, which the
        // mask drops (s + n ≤ 8).
        _mm512_and_si512(_mm512_srlv_epi16(v, counts), _mm512_set1_epi8(mask))
    }
}

/// Lanes 0–3 from element 0 of `v`, 4–7 from 1, 8–11 from 2, 12–15 from 3 when `per_16`
/// (Q6_K: a scale per 16 values: lanes 0–3 b0 0..16, 4–7 b1 0..16, 8–11 b0 16..32, 12–15 b1
/// 16..32), else 0–3 and 8–11 from 0, 4–7 and 12–15 from 1.
#[inline(always)]
unsafe fn lanes(v: __m128, per_16: bool) -> __m512 {
    // SAFETY: register arithmetic only.
    unsafe {
        let idx = if per_16 {
            _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3)
        } else {
            _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
        };
        _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v))
    }
}

/// f16 at `p` as f32.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller's contract (2 bytes at p).
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(p.cast::<u16>().read_unaligned())))) }
}

/// Levels (lane order), d_w and m_w lanes of chunk `c` of a row of format K (Q4_K, Q5_K or Q6_K)
/// at `p`.
///
/// # Safety
/// Super-block c / 4 of format K lies at `p`; the CPU has AVX-512 BW and F16C.
#[inline(always)]
pub unsafe fn decode<const K: u8>(p: *const u8, c: usize, bb: usize) -> (__m512i, __m512, __m512) {
    let j = c % 4;
    // SAFETY: every read stays inside super-block c / 4 (offsets per reference.rs).
    unsafe {
        let b = p.add((c / 4) * bb);
        if K == Q6_K {
            let (h, odd) = (j / 2, (j % 2) as u16);
            // ql[64h..64h + 64] = [b0 0..16, b0 16..32, b1 0..16, b1 16..32] → lanes (0, 2, 1, 3).
            let ql = _mm512_loadu_si512(b.add(64 * h).cast());
            let ql = bits_of(_mm512_shuffle_i64x2::<0b11_01_10_00>(ql, ql), 4 * odd, 4 * odd, 0x0f);
            // qh[32h..32h + 32]: b0 takes bits 2k, b1 bits 2k + 2 (k = 2·(j % 2)).
            let qh = doubled(_mm256_loadu_si256(b.add(128 + 32 * h).cast()));
            let qh = bits_of(qh, 4 * odd, 4 * odd + 2, 3);
            let u = _mm512_or_si512(ql, _mm512_slli_epi16::<4>(qh));
            let sc = _mm_cvtepi8_epi32(_mm_cvtsi32_si128(b.add(192 + 4 * j).cast::<i32>().read_unaligned()));
            let dw = _mm_mul_ps(_mm_set1_ps(f16_at(b.add(208))), _mm_cvtepi32_ps(sc));
            return (u, lanes(dw, true), _mm512_setzero_ps());
        }
        let qs = if K == Q5_K { b.add(48) } else { b.add(16) };
        let t = doubled(_mm256_loadu_si256(qs.add(32 * j).cast()));
        let mut u = bits_of(t, 0, 4, 0x0f);
        if K == Q5_K {
            let qh = doubled(_mm256_loadu_si256(b.add(16).cast()));
            let s = 2 * j as u16;
            u = _mm512_or_si512(u, _mm512_slli_epi16::<4>(bits_of(qh, s, s + 1, 1)));
        }
        let scales = std::slice::from_raw_parts(b.add(4), 12);
        let ((s0, m0), (s1, m1)) = (q4_k_scale_min(scales, 2 * j), q4_k_scale_min(scales, 2 * j + 1));
        let ints = _mm_setr_epi32(i32::from(s0), i32::from(s1), i32::from(m0), i32::from(m1));
        let (d, dmin) = (f16_at(b), f16_at(b.add(2)));
        // [d·sc0, d·sc1, dmin·m0, dmin·m1], each exact in f32 (an f16 times a 6-bit integer);
        // m_w = −(dmin·m) by its sign bit, as reference.rs negates.
        let v = _mm_mul_ps(_mm_setr_ps(d, d, dmin, dmin), _mm_cvtepi32_ps(ints));
        let mw = _mm_xor_ps(_mm_movehl_ps(v, v), _mm_set1_ps(-0.0));
        (u, lanes(v, false), lanes(mw, false))
    }
}
