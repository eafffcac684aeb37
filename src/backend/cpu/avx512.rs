//! AVX-512 fast paths of the CPU matmul. Each is bit-identical to the portable code it stands in
//! for (tests below), so which one runs never shows in the results:
//!
//! - [`dot_quant`]: one f32 row against 1–4 quantized weight rows, each 32-value block decoded in
//!   registers and never stored (the decode, m = 1, path). Values are those of dequant.rs
//!   (`q·d + m` as a rounded multiply then a rounded add for Q4_1, `(q - 8)·d` for Q4_0, `q·d`
//!   for Q8_0), fused-multiply-added in simd.rs's order: value 16c + l of the row goes to lane l
//!   in order of c, lanes then meet in simd.rs's tree. Quantized rows hold whole blocks, so k is a
//!   multiple of 32 and there is no tail. Equal to `simd::dot(x, dequantize(row))`.
//! - [`dequantize_row`]: dequant.rs's values, 32 at a time (the batched path's tile fill).
//! - [`dot4x4`]: 16 dot products of 4 rows by 4 rows in simd.rs's order, each operand chunk
//!   loaded once for four products (the batched path's micro-kernel). Equal to 16 `simd::dot`s.
//!
//! One zmm register is exactly simd.rs's 16 lanes. Used only when [`AVAILABLE`] (decided once).

use std::arch::x86_64::*;
use std::sync::LazyLock;

use crate::quant::Format;

/// Whether this CPU runs these kernels (AVX-512F plus the AVX2/FMA/F16C it implies on real parts),
/// unless `ULTRA_CPU_DISABLE` turns them off (isa.rs).
pub static AVAILABLE: LazyLock<bool> = LazyLock::new(|| {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
        && super::isa::avx2_fma() // so ULTRA_CPU_DISABLE=avx2 turns these off too
        && !super::isa::disabled("avx512")
});

/// Block formats with an in-register decoder, as const-generic tags.
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q8_0: u8 = 2;

/// The decoder tag of a format, if it has one.
fn tag(format: Format) -> Option<u8> {
    match format {
        Format::Q4_0 => Some(Q4_0),
        Format::Q4_1 => Some(Q4_1),
        Format::Q8_0 => Some(Q8_0),
        Format::F32 | Format::F16 | Format::BF16 | Format::Q5_0 | Format::Q5_1 => None,
        Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K => None,
        Format::Intn(_) => None,
    }
}

/// Whether [`dot_quant`] and [`dequantize_row`] run for `format` on this CPU.
pub fn handles(format: Format) -> bool {
    *AVAILABLE && tag(format).is_some()
}

const fn block_bytes(f: u8) -> usize {
    match f {
        Q4_0 => 18,
        Q4_1 => 20,
        _ => 34,
    }
}

/// The f16 at `p` (little-endian), widened exactly.
#[inline]
#[target_feature(enable = "avx512f,f16c")]
unsafe fn f16_at(p: *const u8) -> __m512 {
    // SAFETY: the caller points p at 2 readable bytes.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm512_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// Values 0..16 and 16..32 of the block at `b`, as dequant.rs computes them.
///
/// # Safety
/// `b` points at one whole block of format `F`.
#[inline]
#[target_feature(enable = "avx512f,f16c")]
unsafe fn decode<const F: u8>(b: *const u8) -> [__m512; 2] {
    // SAFETY: every read stays inside the block (the caller's contract; offsets per dequant.rs).
    unsafe {
        match F {
            Q4_0 => {
                let d = f16_at(b);
                let q = _mm512_cvtepu8_epi32(_mm_loadu_si128(b.add(2).cast()));
                let eight = _mm512_set1_epi32(8);
                let lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0f)), eight);
                let hi = _mm512_sub_epi32(_mm512_srli_epi32::<4>(q), eight);
                [_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d)]
            }
            Q4_1 => {
                let (d, m) = (f16_at(b), f16_at(b.add(2)));
                let q = _mm512_cvtepu8_epi32(_mm_loadu_si128(b.add(4).cast()));
                let lo = _mm512_and_si512(q, _mm512_set1_epi32(0x0f));
                let hi = _mm512_srli_epi32::<4>(q);
                [
                    _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), m),
                    _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), d), m),
                ]
            }
            _ => {
                let d = f16_at(b);
                let lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(b.add(2).cast()));
                let hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(b.add(18).cast()));
                [_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d)]
            }
        }
    }
}

/// simd.rs's lane tree: (l, l+8) → (l, l+4) → (l, l+2) → (0, 1).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn reduce(v: __m512) -> f32 {
    let lo = _mm512_castps512_ps256(v);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    let s8 = _mm256_add_ps(lo, hi);
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps::<1>(s2, s2)))
}

/// [dot(x, row) for row in rows], `x` loaded once per block for all R rows.
///
/// # Safety
/// Each row points at x.len() / 32 whole blocks of format `F`; x.len() is a multiple of 32.
#[target_feature(enable = "avx512f,f16c")]
unsafe fn dot_rows<const F: u8, const R: usize>(rows: [*const u8; R], x: &[f32]) -> [f32; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..x.len() / 32 {
        // SAFETY: block b < x.len() / 32 exists in x and in every row (the caller's contract).
        unsafe {
            let px = x.as_ptr().add(b * 32);
            let (x0, x1) = (_mm512_loadu_ps(px), _mm512_loadu_ps(px.add(16)));
            for r in 0..R {
                let [w0, w1] = decode::<F>(rows[r].add(b * block_bytes(F)));
                acc[r] = _mm512_fmadd_ps(w0, x0, acc[r]);
                acc[r] = _mm512_fmadd_ps(w1, x1, acc[r]);
            }
        }
    }
    acc.map(|v| reduce(v))
}

/// out[r] = dot(x, dequantize(rows[r])) for 1–4 rows, bit for bit.   rows: quantized rows of k = x.len()
/// Panics unless `handles(format)`, 1 ≤ rows.len() ≤ 4, and every row holds k / 32 blocks.
pub fn dot_quant(format: Format, rows: &[&[u8]], x: &[f32], out: &mut [f32]) {
    let f = tag(format).filter(|_| *AVAILABLE).expect("dot_quant: format or CPU not supported");
    assert!(x.len().is_multiple_of(32) && (1..=4).contains(&rows.len()) && out.len() == rows.len());
    for row in rows {
        assert_eq!(row.len(), x.len() / 32 * block_bytes(f), "dot_quant: row length");
    }
    let p = |i: usize| rows[i.min(rows.len() - 1)].as_ptr();
    // SAFETY: the CPU has the features (AVAILABLE); rows and x have the lengths checked above.
    unsafe {
        match (f, rows.len()) {
            (Q4_0, 4) => out.copy_from_slice(&dot_rows::<Q4_0, 4>([p(0), p(1), p(2), p(3)], x)),
            (Q4_1, 4) => out.copy_from_slice(&dot_rows::<Q4_1, 4>([p(0), p(1), p(2), p(3)], x)),
            (Q8_0, 4) => out.copy_from_slice(&dot_rows::<Q8_0, 4>([p(0), p(1), p(2), p(3)], x)),
            (Q4_0, _) => out.iter_mut().enumerate().for_each(|(i, o)| *o = dot_rows::<Q4_0, 1>([p(i)], x)[0]),
            (Q4_1, _) => out.iter_mut().enumerate().for_each(|(i, o)| *o = dot_rows::<Q4_1, 1>([p(i)], x)[0]),
            _ => out.iter_mut().enumerate().for_each(|(i, o)| *o = dot_rows::<Q8_0, 1>([p(i)], x)[0]),
        }
    }
}

#[target_feature(enable = "avx512f,f16c")]
unsafe fn dequantize<const F: u8>(src: &[u8], dst: &mut [f32]) {
    for b in 0..dst.len() / 32 {
        // SAFETY: block b exists in src and dst (checked by `dequantize_row`).
        unsafe {
            let [lo, hi] = decode::<F>(src.as_ptr().add(b * block_bytes(F)));
            let y = dst.as_mut_ptr().add(b * 32);
            _mm512_storeu_ps(y, lo);
            _mm512_storeu_ps(y.add(16), hi);
        }
    }
}

/// dst = the values of one quantized row, bit-identical to dequant.rs. Panics unless
/// `handles(format)` and src holds dst.len() / 32 blocks.
pub fn dequantize_row(format: Format, src: &[u8], dst: &mut [f32]) {
    let f = tag(format).filter(|_| *AVAILABLE).expect("dequantize_row: format or CPU not supported");
    assert!(dst.len().is_multiple_of(32) && src.len() == dst.len() / 32 * block_bytes(f), "dequantize_row: lengths");
    // SAFETY: the CPU has the features (AVAILABLE); lengths checked above.
    unsafe {
        match f {
            Q4_0 => dequantize::<Q4_0>(src, dst),
            Q4_1 => dequantize::<Q4_1>(src, dst),
            _ => dequantize::<Q8_0>(src, dst),
        }
    }
}

/// out[i][j] = dot(a[i], b[j]), the 16 products of 4 rows by 4 rows, all of one length.
///
/// # Safety
/// The CPU has AVX-512F and FMA; all eight slices have the same length.
#[target_feature(enable = "avx512f,fma")]
pub unsafe fn dot4x4(a: [&[f32]; 4], b: [&[f32]; 4]) -> [[f32; 4]; 4] {
    let k = a[0].len();
    let chunks = k / 16;
    let mut acc = [[_mm512_setzero_ps(); 4]; 4];
    for c in 0..chunks {
        // SAFETY: c·16 + 16 ≤ k, the length of every slice (the caller's contract).
        unsafe {
            let bv = b.map(|r| _mm512_loadu_ps(r.as_ptr().add(c * 16)));
            for i in 0..4 {
                let av = _mm512_loadu_ps(a[i].as_ptr().add(c * 16));
                for j in 0..4 {
                    acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
                }
            }
        }
    }
    // Plain loops, not closures over `acc`: a closure borrowing it made LLVM keep the 16
    // accumulators in memory and store each one after every multiply-add.
    let mut out = [[0.0f32; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            let mut sum = reduce(acc[i][j]);
            for t in chunks * 16..k {
                sum = a[i][t].mul_add(b[j][t], sum);
            }
            out[i][j] = sum;
        }
    }
    out
}

/// [dot(rows[r], v) for r in 0..16] (simd.rs's order), v loaded once per chunk for all 16, and the
/// 16 lane trees run together: each step adds the same pairs as `reduce`, two or four trees per
/// register, so the bits are those of 16 `dot` calls with a quarter of the reduction instructions.
///
/// # Safety
/// The CPU has AVX-512F and FMA; every row is as long as v.
#[target_feature(enable = "avx512f,fma")]
pub unsafe fn dot16(rows: [&[f32]; 16], v: &[f32]) -> [f32; 16] {
    let chunks = v.len() / 16;
    let mut acc = [_mm512_setzero_ps(); 16];
    for c in 0..chunks {
        // SAFETY: c·16 + 16 ≤ v.len(), the length of every row (the caller's contract).
        unsafe {
            let vv = _mm512_loadu_ps(v.as_ptr().add(c * 16));
            for r in 0..16 {
                acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(rows[r].as_ptr().add(c * 16)), vv, acc[r]);
            }
        }
    }
    // (l, l+8): rows 2t, 2t + 1 → [s8 of 2t | s8 of 2t + 1].
    let s8: [__m512; 8] = std::array::from_fn(|t| {
        let (a, b) = (acc[2 * t], acc[2 * t + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b01_00_01_00>(a, b), _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b))
    });
    // (l, l+4): block r of s4[u] holds s4 of row 4u + r.
    let s4: [__m512; 4] = std::array::from_fn(|u| {
        let (a, b) = (s8[2 * u], s8[2 * u + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b10_00_10_00>(a, b), _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b))
    });
    // (l, l+2): block r of s2[w] holds [s2 of row 8w + r, s2 of row 8w + 4 + r].
    let s2: [__m512; 2] = std::array::from_fn(|w| {
        let (a, b) = (s4[2 * w], s4[2 * w + 1]);
        _mm512_add_ps(_mm512_shuffle_ps::<0b01_00_01_00>(a, b), _mm512_shuffle_ps::<0b11_10_11_10>(a, b))
    });
    // (0, 1): lane 4r + j holds row 4j + r.
    let s = _mm512_add_ps(
        _mm512_shuffle_ps::<0b10_00_10_00>(s2[0], s2[1]),
        _mm512_shuffle_ps::<0b11_01_11_01>(s2[0], s2[1]),
    );
    let s = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
    let mut out = [0.0f32; 16];
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), s) };
    for (r, sum) in out.iter_mut().enumerate() {
        for t in chunks * 16..v.len() {
            *sum = rows[r][t].mul_add(v[t], *sum);
        }
    }
    out
}

/// out[h][i] = fma(p[h][j], src[at[j] + i], out[h][i]) for j in order and each of H heads, every
/// src row loaded once for all H heads (the query heads of one KV head share their V rows), 64
/// floats of each head's output in registers (4·H independent FMA chains): the element-wise
/// arithmetic of one axpy per (head, j), so the same bits. H = 1 is simd.rs's `axpy_rows`.
///
/// # Safety
/// The CPU has AVX-512F and FMA; every p[h].len() == at.len(); every out[h] has the length d of
/// the others, and src[at[j]..at[j] + d] is in range.
#[target_feature(enable = "avx512f,fma")]
pub unsafe fn axpy_rows_heads<const H: usize>(p: [&[f32]; H], src: &[f32], at: &[usize], mut out: [&mut [f32]; H]) {
    let d = out[0].len();
    let mut i = 0;
    while i + 64 <= d {
        // SAFETY: i + 64 ≤ d, within every out[h] and every row (the caller's contract).
        unsafe {
            let mut acc: [[__m512; 4]; H] =
                std::array::from_fn(|h| std::array::from_fn(|c| _mm512_loadu_ps(out[h].as_ptr().add(i + 16 * c))));
            for (j, &a) in at.iter().enumerate() {
                let row = src.as_ptr().add(a + i);
                let v: [__m512; 4] = std::array::from_fn(|c| _mm512_loadu_ps(row.add(16 * c)));
                for h in 0..H {
                    let pv = _mm512_set1_ps(*p[h].get_unchecked(j));
                    for c in 0..4 {
                        acc[h][c] = _mm512_fmadd_ps(pv, v[c], acc[h][c]);
                    }
                }
            }
            for (o, acc) in out.iter_mut().zip(&acc) {
                for (c, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(o.as_mut_ptr().add(i + 16 * c), *a);
                }
            }
        }
        i += 64;
    }
    for h in 0..H {
        for (&pj, &a) in p[h].iter().zip(at) {
            for t in i..d {
                out[h][t] = pj.mul_add(src[a + t], out[h][t]);
            }
        }
    }
}
