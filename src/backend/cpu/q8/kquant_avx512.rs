//! AVX-512 decoding of one k-quant chunk (64 values: reference.rs's `unpack_kquant_chunk`) into
//! lane order [b0 0..16, b1 0..16, b0 16..32, b1 16..32] (mod.rs), for avx512.rs's kernels.
//!
//! The bytes of both 32-value halves of a chunk sit side by side in the super-block (Q4_K/Q5_K:
//! the low and high nibbles of the same 32 bytes; Q6_K: two runs of 32 bytes), so one 128-bit
//! lane shuffle puts them in lane order and shifts by a per-lane count pick the bits: no byte
//! permute. The scales come per chunk from the super-block's header.

use std::arch::x86_64::*;

use super::tags::{Q5_K, Q6_K};

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

/// f16 at `p` as f32.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller's contract (2 bytes at p).
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(p.cast::<u16>().read_unaligned())))) }
}

/// The levels (lane order) of chunk j of a k-quant super-block at `b`.
///
/// # Safety
/// A super-block of format K lies at `b`; j < 4; the CPU has AVX-512 BW.
#[inline(always)]
pub unsafe fn levels<const K: u8>(b: *const u8, j: usize) -> __m512i {
    // SAFETY: reads inside the super-block (Q6_K: ql at 0..128, qh at 128..192; Q4_K/Q5_K: qs at
    // 16 or 48, Q5_K's qh at 16..48).
    unsafe {
        if K == Q6_K {
            let (h, odd) = (j / 2, (j % 2) as u16);
            // ql[64h..64h + 64] = [b0 0..16, b0 16..32, b1 0..16, b1 16..32] → lanes (0, 2, 1, 3).
            let ql = _mm512_loadu_si512(b.add(64 * h).cast());
            let ql = bits_of(_mm512_shuffle_i64x2::<0b11_01_10_00>(ql, ql), 4 * odd, 4 * odd, 0x0f);
            // qh[32h..32h + 32]: b0 takes bits 2k, b1 bits 2k + 2 (k = 2·(j % 2)).
            let qh = doubled(_mm256_loadu_si256(b.add(128 + 32 * h).cast()));
            let qh = bits_of(qh, 4 * odd, 4 * odd + 2, 3);
            return _mm512_or_si512(ql, _mm512_slli_epi16::<4>(qh));
        }
        let qs = if K == Q5_K { b.add(48) } else { b.add(16) };
        let t = doubled(_mm256_loadu_si256(qs.add(32 * j).cast()));
        let u = bits_of(t, 0, 4, 0x0f);
        if K != Q5_K {
            return u;
        }
        let qh = doubled(_mm256_loadu_si256(b.add(16).cast()));
        let s = 2 * j as u16;
        _mm512_or_si512(u, _mm512_slli_epi16::<4>(bits_of(qh, s, s + 1, 1)))
    }
}

/// A super-block's d_w and m_w, decoded once for its 4 chunks: Q4_K/Q5_K's eight d·sc and
/// −(dmin·m) (sub-block i in lane i; their 6-bit pairs unpacked with ggml's three masks over the
/// 12 bytes as u32s, the values of quant/kquant's `scale_min`: unit-tested through the kernels),
/// Q6_K's sixteen d·sc (one per 16 values) and zeros.
///
/// # Safety
/// A super-block of format K lies at `b`; the CPU has AVX-512 F and F16C.
#[inline(always)]
pub unsafe fn scales<const K: u8>(b: *const u8) -> (__m512, __m512) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    // SAFETY: bytes 0..16 (Q4_K/Q5_K) or 192..210 (Q6_K) of the super-block.
    unsafe {
        if K == Q6_K {
            let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(b.add(192).cast())));
            return (_mm512_mul_ps(_mm512_set1_ps(f16_at(b.add(208))), sc), _mm512_setzero_ps());
        }
        let word = |i: usize| b.add(4 + 4 * i).cast::<u32>().read_unaligned();
        let (w0, w1, w2) = (word(0), word(1), word(2));
        let sc = u64::from(w0 & LOW6) | u64::from((w2 & LOW4) | ((w0 >> 6) & LOW2) << 4) << 32;
        let m = u64::from(w1 & LOW6) | u64::from(((w2 >> 4) & LOW4) | ((w1 >> 6) & LOW2) << 4) << 32;
        let to_f32 = |v: u64| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v as i64)));
        let (d, dmin) = (_mm256_set1_ps(f16_at(b)), _mm256_set1_ps(f16_at(b.add(2))));
        // Exact products (an f16 times a 6-bit integer); m_w negated by its sign bit, as
        // reference.rs negates.
        let mw = _mm256_xor_ps(_mm256_mul_ps(dmin, to_f32(m)), _mm256_set1_ps(-0.0));
        (_mm512_castps256_ps512(_mm256_mul_ps(d, to_f32(sc))), _mm512_castps256_ps512(mw))
    }
}

/// Chunk j's d_w or m_w lanes from [`scales`]: Q4_K/Q5_K lanes 0–3 and 8–11 from sub-block 2j,
/// 4–7 and 12–15 from 2j + 1; Q6_K (a scale per 16 values) lanes 0–3 (b0 0..16) from scale 4j,
/// 4–7 (b1 0..16) from 4j + 2, 8–11 (b0 16..32) from 4j + 1, 12–15 (b1 16..32) from 4j + 3.
#[inline(always)]
pub unsafe fn chunk_lanes<const K: u8>(v: __m512, j: usize) -> __m512 {
    // SAFETY: register arithmetic only.
    unsafe {
        let (base, first) = if K == Q6_K {
            (_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3), 4 * j)
        } else {
            (_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1), 2 * j)
        };
        _mm512_permutexvar_ps(_mm512_add_epi32(base, _mm512_set1_epi32(first as i32)), v)
    }
}
