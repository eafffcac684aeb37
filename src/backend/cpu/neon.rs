//! NEON (aarch64) builds of simd.rs's f32 dot products and axpy, bit-identical to its portable
//! path: the 16 lanes of simd.rs's summation order are four `float32x4` registers (lanes 0–3,
//! 4–7, 8–11, 12–15), each step one fused multiply-add (`fmla`) per register, and the lane tree
//! (l, l+8) → (l, l+4) → (l, l+2) → (0, 1) is two register adds and two scalar ones.

use std::arch::aarch64::*;

const LANES: usize = 16;

/// simd.rs's lane tree over the four lane registers.
#[inline(always)]
pub fn reduce(acc: [float32x4_t; 4]) -> f32 {
    // SAFETY: register arithmetic only; NEON is part of every aarch64 target.
    unsafe {
        let s8 = [vaddq_f32(acc[0], acc[2]), vaddq_f32(acc[1], acc[3])]; // acc[l] + acc[l + 8]
        let s4 = vaddq_f32(s8[0], s8[1]); // s8[l] + s8[l + 4]
        let s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4)); // s4[l] + s4[l + 2]
        vget_lane_f32::<0>(s2) + vget_lane_f32::<1>(s2) // s2[0] + s2[1]
    }
}

/// The four lane registers of 16 floats at `p`.
///
/// # Safety
/// p..p + 16 is readable.
#[inline(always)]
unsafe fn load16(p: *const f32) -> [float32x4_t; 4] {
    // SAFETY: the caller's contract.
    unsafe { [vld1q_f32(p), vld1q_f32(p.add(4)), vld1q_f32(p.add(8)), vld1q_f32(p.add(12))] }
}

/// simd::dot. Panics if the lengths differ.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot: length mismatch");
    let chunks = a.len() / LANES;
    // SAFETY: register arithmetic; every load is at i..i + 16 with i + 16 ≤ chunks·16 ≤ len.
    let mut sum = unsafe {
        let mut acc = [vdupq_n_f32(0.0); 4];
        for c in 0..chunks {
            let (va, vb) = (load16(a.as_ptr().add(c * LANES)), load16(b.as_ptr().add(c * LANES)));
            for r in 0..4 {
                acc[r] = vfmaq_f32(acc[r], va[r], vb[r]);
            }
        }
        reduce(acc)
    };
    for i in chunks * LANES..a.len() {
        sum = a[i].mul_add(b[i], sum);
    }
    sum
}

/// simd::dot4: four dot products sharing `v`, loaded once per chunk. Panics if a length differs.
pub fn dot4(rows: [&[f32]; 4], v: &[f32]) -> [f32; 4] {
    for r in rows {
        assert_eq!(r.len(), v.len(), "dot4: length mismatch");
    }
    let chunks = v.len() / LANES;
    // SAFETY: as in dot, for `v` and every row (all of v's length).
    let acc = unsafe {
        let mut acc = [[vdupq_n_f32(0.0); 4]; 4];
        for c in 0..chunks {
            let vv = load16(v.as_ptr().add(c * LANES));
            for (acc, row) in acc.iter_mut().zip(rows) {
                let vr = load16(row.as_ptr().add(c * LANES));
                for l in 0..4 {
                    acc[l] = vfmaq_f32(acc[l], vr[l], vv[l]);
                }
            }
        }
        acc
    };
    std::array::from_fn(|r| {
        let mut sum = reduce(acc[r]);
        for i in chunks * LANES..v.len() {
            sum = rows[r][i].mul_add(v[i], sum);
        }
        sum
    })
}

/// simd::axpy: y[i] = fma(a, x[i], y[i]), four at a time. Panics if the lengths differ.
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "axpy: length mismatch");
    let chunks = x.len() / 4;
    // SAFETY: c·4 + 4 ≤ the length of both slices.
    unsafe {
        let va = vdupq_n_f32(a);
        for c in 0..chunks {
            let (px, py) = (x.as_ptr().add(4 * c), y.as_mut_ptr().add(4 * c));
            vst1q_f32(py, vfmaq_f32(vld1q_f32(py), va, vld1q_f32(px)));
        }
    }
    for i in chunks * 4..x.len() {
        y[i] = a.mul_add(x[i], y[i]);
    }
}
