//! reference.rs's activation quantizer on AVX-512, operation for operation (the same bits: the
//! test below compares them): each block's 32 values in two registers, its largest magnitude by a
//! max reduction (exact in any order), both planes rounded with the same magic-number adds, and
//! the chunk's integer sums from the planes' i32 values.

use std::arch::x86_64::*;

use super::XChunk;

/// reference::round_even on 16 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn round_even(v: __m512) -> __m512 {
    const MAGIC: f32 = 12_582_912.0;
    _mm512_sub_ps(_mm512_add_ps(v, _mm512_set1_ps(MAGIC)), _mm512_set1_ps(MAGIC))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn clamp127(v: __m512) -> __m512 {
    _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0)), _mm512_set1_ps(127.0))
}

/// # Safety
/// The CPU has AVX-512 F/BW and FMA; x.len() is a multiple of 32 with x.len() ≤ 64·out.len().
#[target_feature(enable = "avx512f,avx512bw,fma")]
unsafe fn quantize_row_k(x: &[f32], out: &mut [XChunk]) {
    let blocks = x.len() / 32;
    for (c, chunk) in out.iter_mut().enumerate() {
        *chunk = XChunk::ZERO;
        // 256·hi + lo at each chunk byte position (mod.rs's lane order).
        let mut q16 = [0i32; 64];
        for half in 0..2 {
            let b = 2 * c + half;
            if b >= blocks {
                continue;
            }
            // SAFETY: block b < blocks lies in x.
            let v = unsafe { [_mm512_loadu_ps(x.as_ptr().add(32 * b)), _mm512_loadu_ps(x.as_ptr().add(32 * b + 16))] };
            let mags = _mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1]));
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(mags, _mm512_setzero_ps()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let (vd, vid) = (_mm512_set1_ps(d), _mm512_set1_ps(id));
            let dx = d / 256.0;
            let mut sum = _mm512_setzero_si512();
            // Values 0..16 go to bytes 16·half.., values 16..32 to 32 + 16·half.. (reference.rs).
            for (v, at) in v.into_iter().zip([16 * half, 32 + 16 * half]) {
                let h = round_even(clamp127(_mm512_mul_ps(v, vid)));
                let residual = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_setzero_ps(), h), vd, v);
                let l = round_even(clamp127(_mm512_mul_ps(_mm512_mul_ps(residual, vid), _mm512_set1_ps(256.0))));
                let (h, l) = (_mm512_cvtps_epi32(h), _mm512_cvtps_epi32(l));
                let q = _mm512_add_epi32(_mm512_slli_epi32::<8>(h), l);
                sum = _mm512_add_epi32(sum, q);
                // SAFETY: bytes at..at + 16 of 64, and q16[at..at + 16] of 64.
                unsafe {
                    _mm_storeu_si128(chunk.q.as_mut_ptr().add(at).cast(), _mm512_cvtepi32_epi8(h));
                    _mm_storeu_si128(chunk.lo.as_mut_ptr().add(at).cast(), _mm512_cvtepi32_epi8(l));
                    _mm512_storeu_si512(q16.as_mut_ptr().add(at).cast(), q);
                }
                chunk.dx[at / 4..at / 4 + 4].fill(dx);
            }
            chunk.s[4 * half] = dx * _mm512_reduce_add_epi32(sum) as f32;
        }
        for l in 0..16 {
            chunk.sum4[l] = q16[4 * l] + q16[4 * l + 1] + q16[4 * l + 2] + q16[4 * l + 3];
        }
        for j in 0..32 {
            // |256·q + lo| ≤ 256·127 + 127: exact in i16.
            (chunk.even[j], chunk.odd[j]) = (q16[2 * j] as i16, q16[2 * j + 1] as i16);
        }
    }
}

/// reference::quantize_row on AVX-512 (the same bits). Panics unless the CPU has AVX-512 (avx512.rs's
/// AVAILABLE) and the lengths match.
pub fn quantize_row(x: &[f32], out: &mut [XChunk]) {
    assert!(*super::avx512::AVAILABLE, "quantize_row: CPU not supported");
    assert!(x.len().is_multiple_of(32) && x.len().div_ceil(64) == out.len(), "quantize_row: lengths");
    // SAFETY: the features and lengths are checked above.
    unsafe { quantize_row_k(x, out) }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::*;
    use crate::backend::cpu::simd::noise;

    fn bits(x: &[XChunk]) -> Vec<u8> {
        x.iter()
            .flat_map(|c| {
                let ints = c.sum4.iter().flat_map(|v| v.to_le_bytes());
                let halves = c.even.iter().chain(&c.odd).flat_map(|v| v.to_le_bytes());
                let floats = c.dx.iter().chain(&c.s).flat_map(|v| v.to_bits().to_le_bytes());
                c.q.iter().chain(&c.lo).map(|&b| b as u8).chain(ints).chain(halves).chain(floats).collect::<Vec<u8>>()
            })
            .collect()
    }

    #[test]
    fn the_avx512_quantizer_equals_the_reference_bit_for_bit() {
        if !*super::super::avx512::AVAILABLE {
            eprintln!("SKIPPED: this CPU has no AVX-512 VNNI + VBMI");
            return;
        }
        for (t, blocks) in [1usize, 2, 3, 9, 48].into_iter().enumerate() {
            let k = 32 * blocks;
            let raw = noise(4 * k, 77 + t as u64);
            let mut x: Vec<f32> = raw
                .chunks_exact(4)
                .map(|b| (i32::from_le_bytes(b.try_into().unwrap()) % 100_000) as f32 * 1e-4)
                .collect();
            // A block of zeros (d = 0), one of ties to even, one with a huge outlier.
            x[..32.min(k)].fill(0.0);
            if blocks > 2 {
                x[32..64].iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 16.0) * 0.5);
                x[70] = 3.0e4;
            }
            let c = k.div_ceil(64);
            let (mut want, mut got) = (vec![XChunk::ZERO; c], vec![XChunk::ZERO; c]);
            reference::quantize_row(&x, &mut want);
            quantize_row(&x, &mut got);
            assert_eq!(bits(&got), bits(&want), "{blocks} blocks");
        }
    }
}
