//! Inner-loop primitives: dot products and axpy. Every reduction in the CPU backend goes through
//! [`dot`] / [`dot4`], so this file alone fixes the summation order (batch invariance).
//!
//! Summation order of a dot product of length k (the same for every path and every caller):
//! 16 lane accumulators, lane l takes the fused multiply-adds of elements 16c + l in order of c;
//! the lanes are combined by the fixed tree (l, l+8) → (l, l+4) → (l, l+2) → (0, 1); the
//! k mod 16 tail elements are then fused-multiply-added into that sum in order. With every
//! product fused (one rounding per step), the portable path, the AVX2+FMA path and the NEON path
//! (neon.rs) are bit-identical; the SIMD path is chosen once per process when the CPU has it.

const LANES: usize = 16;

#[cfg(target_arch = "x86_64")]
use super::isa::avx2_fma;
#[cfg(target_arch = "aarch64")]
use super::{isa::neon, neon as arm};

/// Σ a[i]·b[i] in the order described at the top of this file. Panics if the lengths differ
/// (an internal invariant: callers slice both from checked shapes).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot: length mismatch");
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at runtime above); lengths are equal.
        return unsafe { avx2::dot(a, b) };
    }
    #[cfg(target_arch = "aarch64")]
    if neon() {
        return arm::dot(a, b);
    }
    portable::dot(a, b)
}

/// [dot(rows[0], v), …, dot(rows[3], v)], bit-identical to four [`dot`] calls but loading `v`
/// once per chunk. Since a·b and b·a round the same, it serves both 4 activations × 1 weight
/// row and 1 activation × 4 weight rows.
#[inline]
pub fn dot4(rows: [&[f32]; 4], v: &[f32]) -> [f32; 4] {
    for r in rows {
        assert_eq!(r.len(), v.len(), "dot4: length mismatch");
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at runtime above); lengths are equal.
        return unsafe { avx2::dot4(rows, v) };
    }
    #[cfg(target_arch = "aarch64")]
    if neon() {
        return arm::dot4(rows, v);
    }
    rows.map(|r| portable::dot(r, v))
}

/// [dot(rows[r], v) for r in 0..16], bit-identical to 16 [`dot`] calls (attention's scores:
/// one query against 16 keys; AVX-512 runs the 16 lane trees together).
#[inline]
pub fn dot16(rows: [&[f32]; 16], v: &[f32]) -> [f32; 16] {
    for r in rows {
        assert_eq!(r.len(), v.len(), "dot16: length mismatch");
    }
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime); lengths are equal.
        return unsafe { super::avx512::dot16(rows, v) };
    }
    std::array::from_fn(|r| dot(rows[r], v))
}

/// out[i][j] = dot(a[i], b[j]): 16 dot products, bit-identical to 16 [`dot`] calls, with each
/// chunk of the eight rows loaded once (the batched matmul's micro-kernel; AVX-512 when present).
#[inline]
pub fn dot4x4(a: [&[f32]; 4], b: [&[f32]; 4]) -> [[f32; 4]; 4] {
    let k = a[0].len();
    for r in a.iter().chain(&b) {
        assert_eq!(r.len(), k, "dot4x4: length mismatch");
    }
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime); lengths are equal.
        return unsafe { super::avx512::dot4x4(a, b) };
    }
    a.map(|r| dot4(b, r))
}

/// y[i] = a·x[i] + y[i], fused (one rounding), element by element.
#[inline]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "axpy: length mismatch");
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at runtime above); lengths are equal.
        return unsafe { avx2::axpy(a, x, y) };
    }
    #[cfg(target_arch = "aarch64")]
    if neon() {
        return arm::axpy(a, x, y);
    }
    y.iter_mut().zip(x).for_each(|(y, &x)| *y = a.mul_add(x, *y));
}

/// out[i] = fma(p[j], src[at[j] + i], out[i]) for j = 0, 1, … in order: the same bits as one
/// [`axpy`] per j, but with `out` kept in registers across all j (AVX-512 when present).
/// Panics if some src[at[j]..at[j] + out.len()] is out of range or the lengths of p and at differ.
pub fn axpy_rows(p: &[f32], src: &[f32], at: &[usize], out: &mut [f32]) {
    assert_eq!(p.len(), at.len(), "axpy_rows: length mismatch");
    for &a in at {
        assert!(a.checked_add(out.len()).is_some_and(|end| end <= src.len()), "axpy_rows: row out of range");
    }
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime); every row is in range.
        return unsafe { super::avx512::axpy_rows_heads([p], src, at, [out]) };
    }
    for (&p, &a) in p.iter().zip(at) {
        axpy(p, &src[a..a + out.len()], out);
    }
}

/// [`axpy_rows`] for several heads that share their rows: for each head h (p[h·p_stride..][..at.len()],
/// out[h·d..][..d]), out_h[i] = fma(p_h[j], src[at[j] + i], out_h[i]) for j in order, the same bits
/// as one axpy_rows per head; with AVX-512 each src row is read once for up to 4 heads.
/// Panics if a row is out of range, `out.len()` is not a multiple of d, or p is too short.
pub fn axpy_rows_heads(p: &[f32], p_stride: usize, src: &[f32], at: &[usize], out: &mut [f32], d: usize) {
    if d == 0 {
        return;
    }
    assert!(out.len().is_multiple_of(d), "axpy_rows_heads: out is not whole heads");
    let heads = out.len() / d;
    assert!(heads == 0 || (heads - 1) * p_stride + at.len() <= p.len(), "axpy_rows_heads: p too short");
    for &a in at {
        assert!(a.checked_add(d).is_some_and(|end| end <= src.len()), "axpy_rows_heads: row out of range");
    }
    let p_of = |h: usize| &p[h * p_stride..h * p_stride + at.len()];
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        for (g, outs) in out.chunks_mut(4 * d).enumerate() {
            let (h0, n) = (4 * g, outs.len() / d);
            let mut o = outs.chunks_mut(d);
            let mut next = || o.next().unwrap();
            // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime); lengths and rows
            // are checked above.
            unsafe {
                use super::avx512::axpy_rows_heads as run;
                match n {
                    1 => run([p_of(h0)], src, at, [next()]),
                    2 => run([p_of(h0), p_of(h0 + 1)], src, at, [next(), next()]),
                    3 => run([p_of(h0), p_of(h0 + 1), p_of(h0 + 2)], src, at, [next(), next(), next()]),
                    _ => run(
                        [p_of(h0), p_of(h0 + 1), p_of(h0 + 2), p_of(h0 + 3)],
                        src,
                        at,
                        [next(), next(), next(), next()],
                    ),
                }
            }
        }
        return;
    }
    for (h, o) in out.chunks_mut(d).enumerate() {
        axpy_rows(p_of(h), src, at, o);
    }
}

/// x = e^x for every element, in place: Cephes' expf (n = round(x·log2 e), r = x − n·ln 2 in two
/// parts, a degree-6 polynomial in r, times 2^n by building the exponent bits); within ~1 ulp of
/// e^x for x in [−87, 88], inputs are clamped to that range (attention feeds x ≤ 0, where
/// e^−87 ≈ 0 is as good as 0), NaN stays NaN. Plain f32 operations and fused multiply-adds per
/// element, so the vectorized builds chosen at runtime give the bits of the scalar one.
pub fn exp_in_place(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime).
        return unsafe { exp_avx512(xs) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at runtime).
        return unsafe { exp_avx2(xs) };
    }
    xs.iter_mut().for_each(|x| *x = exp(*x));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exp_avx512(xs: &mut [f32]) {
    xs.iter_mut().for_each(|x| *x = exp(*x));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(xs: &mut [f32]) {
    xs.iter_mut().for_each(|x| *x = exp(*x));
}

/// dst[i] = f(a[i], b[i]), with `f` inlined into a loop built for the widest ISA here (as in
/// [`exp_in_place`]): an `f` of plain f32 operations, mul_adds and [`exp`] vectorizes there and
/// gives the bits of the scalar build on every path.
pub fn zip_map<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [f32], f: F) {
    #[cfg(target_arch = "x86_64")]
    if *super::avx512::AVAILABLE {
        // SAFETY: the CPU supports AVX-512F and FMA (checked at runtime).
        return unsafe { zip_map_avx512(a, b, dst, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at runtime).
        return unsafe { zip_map_avx2(a, b, dst, f) };
    }
    zip_map_with(a, b, dst, f)
}

#[inline(always)]
fn zip_map_with<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [f32], f: F) {
    dst.iter_mut().zip(a.iter().zip(b)).for_each(|(y, (&a, &b))| *y = f(a, b));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn zip_map_avx512<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [f32], f: F) {
    zip_map_with(a, b, dst, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn zip_map_avx2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], dst: &mut [f32], f: F) {
    zip_map_with(a, b, dst, f)
}

/// One element of [`exp_in_place`] (inlined into each target's loop so it vectorizes there).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4; // ln 2 split so n·LN2_HI is exact for |n| ≤ 128
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: adding and subtracting it rounds to an integer
    let x = x.clamp(-87.0, 88.0); // NaN stays NaN
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p = 1.987_569_2e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 5e-1);
    let y = p.mul_add(r * r, r) + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// The portable path: plain loops over fixed-size lane arrays, which LLVM vectorizes where the
/// target has fused multiply-add; elsewhere `mul_add` is a (correctly rounded) libm call.
pub mod portable {
    use super::LANES;

    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0.0f32; LANES];
        let mut a_chunks = a.chunks_exact(LANES);
        let mut b_chunks = b.chunks_exact(LANES);
        for (ca, cb) in (&mut a_chunks).zip(&mut b_chunks) {
            for l in 0..LANES {
                acc[l] = ca[l].mul_add(cb[l], acc[l]);
            }
        }
        let mut sum = reduce(acc);
        for (&x, &y) in a_chunks.remainder().iter().zip(b_chunks.remainder()) {
            sum = x.mul_add(y, sum);
        }
        sum
    }

    /// The fixed lane tree: (l, l+8) → (l, l+4) → (l, l+2) → (0, 1).
    pub fn reduce(acc: [f32; LANES]) -> f32 {
        let s8: [f32; 8] = std::array::from_fn(|l| acc[l] + acc[l + 8]);
        let s4: [f32; 4] = std::array::from_fn(|l| s8[l] + s8[l + 4]);
        let s2: [f32; 2] = std::array::from_fn(|l| s4[l] + s4[l + 2]);
        s2[0] + s2[1]
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use super::LANES;

    /// Two 8-wide registers hold lanes 0..8 and 8..16.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let chunks = a.len() / LANES;
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for c in 0..chunks {
            let i = c * LANES;
            // SAFETY: i + 16 ≤ chunks·16 ≤ len of both slices (the caller checked equal lengths).
            unsafe {
                let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(8)), _mm256_loadu_ps(pb.add(8)), acc1);
            }
        }
        let mut sum = reduce(acc0, acc1);
        for i in chunks * LANES..a.len() {
            sum = a[i].mul_add(b[i], sum);
        }
        sum
    }

    /// Four dot products sharing `v`: eight accumulators, `v` loaded once per chunk.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot4(rows: [&[f32]; 4], v: &[f32]) -> [f32; 4] {
        let chunks = v.len() / LANES;
        let mut lo = [_mm256_setzero_ps(); 4];
        let mut hi = [_mm256_setzero_ps(); 4];
        for c in 0..chunks {
            let i = c * LANES;
            // SAFETY: i + 16 ≤ chunks·16 ≤ the length of `v` and of every row (checked equal).
            unsafe {
                let pv = v.as_ptr().add(i);
                let (v0, v1) = (_mm256_loadu_ps(pv), _mm256_loadu_ps(pv.add(8)));
                for r in 0..4 {
                    let pr = rows[r].as_ptr().add(i);
                    lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(pr), v0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(pr.add(8)), v1, hi[r]);
                }
            }
        }
        std::array::from_fn(|r| {
            let mut sum = reduce(lo[r], hi[r]);
            for i in chunks * LANES..v.len() {
                sum = rows[r][i].mul_add(v[i], sum);
            }
            sum
        })
    }

    /// The lane tree of `portable::reduce`, in registers.
    #[target_feature(enable = "avx2,fma")]
    pub fn reduce(lo: __m256, hi: __m256) -> f32 {
        let s8 = _mm256_add_ps(lo, hi); // lane l: acc[l] + acc[l + 8]
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8)); // s8[l] + s8[l + 4]
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); // s4[l] + s4[l + 2]
        _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps::<1>(s2, s2))) // s2[0] + s2[1]
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        let chunks = x.len() / 8;
        let va = _mm256_set1_ps(a);
        for c in 0..chunks {
            // SAFETY: c·8 + 8 ≤ the length of both slices (the caller checked equal lengths).
            unsafe {
                let (px, py) = (x.as_ptr().add(c * 8), y.as_mut_ptr().add(c * 8));
                _mm256_storeu_ps(py, _mm256_fmadd_ps(va, _mm256_loadu_ps(px), _mm256_loadu_ps(py)));
            }
        }
        for i in chunks * 8..x.len() {
            y[i] = a.mul_add(x[i], y[i]);
        }
    }
}

/// Reproducible random bytes (xorshift64) for the kernel tests: every bit pattern, NaNs included.
#[cfg(test)]
pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The dispatched (SIMD where available) dot equals the portable one bit for bit.
    #[test]
    fn simd_dot_equals_portable_dot() {
        for n in [0, 1, 15, 16, 17, 64, 100, 576, 1537] {
            let (a, b) = (values(n, 1 + n as u32), values(n, 1000 + n as u32));
            assert_eq!(dot(&a, &b).to_bits(), portable::dot(&a, &b).to_bits(), "n = {n}");
            let rows = [values(n, 7), values(n, 8), values(n, 9), a.clone()];
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &b);
            for r in 0..4 {
                assert_eq!(got[r].to_bits(), portable::dot(&rows[r], &b).to_bits(), "n = {n}, row {r}");
                assert_eq!(got[r].to_bits(), portable::dot(&b, &rows[r]).to_bits(), "dot is symmetric");
            }
        }
    }

    /// dot16 (its AVX-512 joint lane trees where available) equals 16 portable dots bit for bit.
    #[test]
    fn dot16_equals_sixteen_dots() {
        for n in [0, 1, 16, 17, 64, 100, 576] {
            let rows: Vec<Vec<f32>> = (0..16).map(|r| values(n, 50 + r)).collect();
            let v = values(n, 99 + n as u32);
            let got = dot16(std::array::from_fn(|r| &rows[r][..]), &v);
            for r in 0..16 {
                assert_eq!(got[r].to_bits(), portable::dot(&rows[r], &v).to_bits(), "n = {n}, row {r}");
            }
        }
    }

    #[test]
    fn exp_is_accurate_and_the_same_on_every_path() {
        let xs: Vec<f32> = (0..2000).map(|i| -87.0 + i as f32 * 0.0875).chain([0.0, -0.0, -1e-8, f32::NAN]).collect();
        let mut fast = xs.clone();
        exp_in_place(&mut fast);
        for (&x, &y) in xs.iter().zip(&fast) {
            assert_eq!(y.to_bits(), exp(x).to_bits(), "x = {x}: dispatched exp differs from scalar");
            if x.is_nan() {
                assert!(y.is_nan());
                continue;
            }
            let exact = (x as f64).exp();
            assert!(((y as f64) - exact).abs() <= exact * 4e-7, "exp({x}) = {y}, want {exact}");
        }
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn axpy_rows_equals_one_axpy_per_row() {
        for d in [1, 64, 100] {
            let (src, p) = (values(10 * d, 5), values(7, 6));
            let at: Vec<usize> = [9, 0, 3, 3, 8, 1, 5].iter().map(|r| r * d).collect();
            let (mut fast, mut slow) = (values(d, 7), values(d, 7));
            axpy_rows(&p, &src, &at, &mut fast);
            for (&p, &a) in p.iter().zip(&at) {
                axpy(p, &src[a..a + d], &mut slow);
            }
            assert_eq!(fast, slow, "d = {d}");
        }
    }

    #[test]
    fn axpy_rows_heads_equals_one_axpy_per_head_and_row() {
        for (d, heads) in [(1, 3), (64, 1), (64, 4), (100, 7), (256, 5)] {
            let (src, stride) = (values(10 * d, 5), 9);
            let p = values(heads * stride, 6);
            let at: Vec<usize> = [9, 0, 3, 3, 8, 1, 5].iter().map(|r| r * d).collect();
            let (mut fast, mut slow) = (values(heads * d, 7), values(heads * d, 7));
            axpy_rows_heads(&p, stride, &src, &at, &mut fast, d);
            for (h, o) in slow.chunks_mut(d).enumerate() {
                for (&p, &a) in p[h * stride..].iter().zip(&at) {
                    axpy(p, &src[a..a + d], o);
                }
            }
            assert_eq!(fast, slow, "d = {d}, {heads} heads");
        }
    }

    #[test]
    fn axpy_is_fused() {
        let (x, mut y) = (values(37, 3), values(37, 4));
        let expected: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| 0.3f32.mul_add(x, y)).collect();
        axpy(0.3, &x, &mut y);
        assert_eq!(y, expected);
    }
}

/// The AVX-512 kernels (avx512.rs) against the portable path, bit for bit.
#[cfg(all(test, target_arch = "x86_64"))]
mod avx512_tests {
    use super::noise;
    use crate::backend::cpu::avx512::{AVAILABLE, dequantize_row, dot_quant, dot4x4};
    use crate::quant::{Format, dequantize_row as reference_dequantize};

    fn floats(n: usize, seed: u64) -> Vec<f32> {
        noise(n, seed).iter().map(|&b| b as f32 / 127.5 - 1.0).collect()
    }

    #[test]
    fn avx512_fused_and_batched_kernels_equal_the_portable_path() {
        if !*AVAILABLE {
            eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let k = 576;
        for format in [Format::Q4_0, Format::Q4_1, Format::Q8_0] {
            let mut bytes = noise(4 * format.row_bytes(k).unwrap(), format.ggml_id() as u64);
            for block in bytes.chunks_exact_mut(format.block_bytes()) {
                block[1] &= 0x3b; // finite f16 scales
                block[3] &= 0x3b;
            }
            let rows: Vec<&[u8]> = bytes.chunks_exact(format.row_bytes(k).unwrap()).collect();
            let x = floats(k, 7);
            let mut expected = [0.0f32; 4];
            for (r, row) in rows.iter().enumerate() {
                let (mut fast, mut reference) = (vec![0.0; k], vec![0.0; k]);
                dequantize_row(format, row, &mut fast);
                reference_dequantize(format, row, &mut reference);
                assert_eq!(fast, reference, "{} dequantize", format.name());
                expected[r] = super::portable::dot(&x, &reference);
            }
            let mut got = [0.0f32; 4];
            dot_quant(format, &rows, &x, &mut got);
            assert_eq!(got.map(f32::to_bits), expected.map(f32::to_bits), "{} fused x4", format.name());
            let mut one = [0.0f32; 3];
            dot_quant(format, &rows[1..], &x, &mut one);
            assert_eq!(one.map(f32::to_bits), [1, 2, 3].map(|r| expected[r].to_bits()), "{} fused x3", format.name());
        }
        for k in [1, 15, 16, 37, 576] {
            let a: Vec<Vec<f32>> = (0..4).map(|i| floats(k, 10 + i)).collect();
            let b: Vec<Vec<f32>> = (0..4).map(|i| floats(k, 20 + i)).collect();
            // SAFETY: AVAILABLE checked above; all slices have length k.
            let got = unsafe { dot4x4([&a[0], &a[1], &a[2], &a[3]], [&b[0], &b[1], &b[2], &b[3]]) };
            for i in 0..4 {
                for j in 0..4 {
                    assert_eq!(got[i][j].to_bits(), super::portable::dot(&a[i], &b[j]).to_bits(), "k {k} ({i}, {j})");
                }
            }
        }
    }
}
