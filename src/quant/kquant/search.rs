//! The scale searches of ggml's k-quant reference quantizers (ggml-quants.c): `make_qkx2_quants`
//! (scale and min, Q2_K/Q4_K/Q5_K), `make_qx_quants` (symmetric scale, Q6_K) and
//! `make_q3_quants` (symmetric scale with coordinate descent, Q3_K).
//!
//! Rounding, which decides the bytes:
//! - Every expression is evaluated in f32 in ggml's source order, each operation rounded on its
//!   own (`w*l*x` is `(w*l)*x`; `a*b - c*d` is two rounded products and a rounded difference).
//!   ggml built with floating-point contraction (an FMA target with GCC's default
//!   `-ffp-contract=fast`) may fuse some of these and so, rarely, pick another level or scale;
//!   ggml built without contraction computes exactly these values.
//! - Levels come from [`nearest_int`]: round to nearest, ties to even.
//! - Integer-to-f32 conversions are exact (levels and scales are small).

/// Sub-blocks whose largest magnitude is below this are all zero (ggml's `GROUP_MAX_EPS`).
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest, ties to even. ggml adds 1.5·2^23 and reads the low
/// mantissa bits, which is exact for |v| < 2^22 (it asserts that); beyond, and for NaN, this
/// saturates (`as i32`), so out-of-range input gives clamped levels instead of garbage.
pub(super) fn nearest_int(v: f32) -> i32 {
    if v.abs() <= 4_194_303.0 {
        ((v + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
    } else {
        v.round_ties_even() as i32
    }
}

/// Parameters of the scale-and-min grid search of [`make_qkx2_quants`].
pub(super) struct Grid {
    /// The i-th candidate maps [min, max] onto `nmax + rmin + rdelta·i` steps, i in 0..=nstep.
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Weighted absolute error instead of weighted squared error.
    pub use_mad: bool,
}

/// `make_qkx2_quants`: fits `x ≈ scale·l - the_min` with levels l in 0..=nmax (written to
/// `levels`), minimizing the weighted error over a grid of candidate step counts, each refined by
/// weighted least squares for scale and min. Returns `(scale, the_min)` with `the_min >= 0`
/// (the min is never above zero).
///
/// As in ggml, a candidate that improves the fit replaces `min` at once, and later candidates
/// map `[min, max]` with that new min.
pub(super) fn make_qkx2_quants(x: &[f32], weights: &[f32], nmax: i32, levels: &mut [u8], grid: &Grid) -> (f32, f32) {
    let n = x.len();
    debug_assert!(n <= 32 && weights.len() == n && levels.len() == n);
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&v, &w) in x.iter().zip(weights).skip(1) {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += w;
        sum_x += w * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let error = |diff: f32| if grid.use_mad { diff.abs() } else { diff * diff };
    let nmax_f = nmax as f32;

    let mut iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for ((l, &v), &w) in levels.iter_mut().zip(x).zip(weights) {
        *l = nearest_int(iscale * (v - min)).clamp(0, nmax) as u8;
        best_error += w * error(scale * *l as f32 + min - v);
    }
    if grid.nstep < 1 {
        return (scale, -min);
    }
    let mut aux = [0u8; 32];
    let aux = &mut aux[..n];
    for is in 0..=grid.nstep {
        iscale = (grid.rmin + grid.rdelta * is as f32 + nmax_f) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((a, &v), &w) in aux.iter_mut().zip(x).zip(weights) {
            let l = nearest_int(iscale * (v - min)).clamp(0, nmax);
            *a = l as u8;
            let l = l as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for ((&a, &v), &w) in aux.iter().zip(x).zip(weights) {
                cur_error += w * error(this_scale * a as f32 + this_min - v);
            }
            if cur_error < best_error {
                levels.copy_from_slice(aux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The signed value of largest magnitude (the first on ties) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// `make_qx_quants` with `rmse_type = 1` and no importance weights (what Q6_K's reference
/// quantizer calls): levels l in -nmax..nmax-1 for `x ≈ scale·l`, weights x², trying 19 step
/// counts `nmax + 0.1·is` (is in -9..=9) and keeping the least-squares scale of the best.
/// Writes `l + nmax` to `levels`; returns the scale (negative when the extreme value is
/// positive: the extreme maps to level -nmax).
pub(super) fn make_qx_quants(x: &[f32], nmax: i32, levels: &mut [u8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = level(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = (level(iscale, v) + nmax) as u8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (q, &v) in levels.iter_mut().zip(x) {
                *q = (level(iscale, v) + nmax) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants` with `do_rmse = true` (Q3_K's reference quantizer): levels l in
/// -nmax..nmax-1 for `x ≈ scale·l` from the extreme value, then up to 5 rounds of coordinate
/// descent on the weighted (x²) least-squares fit, moving one level at a time when that raises
/// `(Σwxl)²/Σwl²`. Writes `l + nmax` to `levels`; returns the least-squares scale.
pub(super) fn make_q3_quants(x: &[f32], nmax: i32, levels: &mut [u8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let iscale = -(nmax as f32) / max;
    let mut l = [0i32; 32];
    let l = &mut l[..x.len()];
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (li, &v) in l.iter_mut().zip(x) {
        *li = clamp(nearest_int(iscale * v));
        let w = v * v;
        sumlx += w * v * *li as f32;
        suml2 += w * *li as f32 * *li as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (li, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let mut slx = sumlx - w * v * *li as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * *li as f32 * *li as f32;
                let new_l = clamp(nearest_int(v * sl2 / slx));
                if new_l != *li {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *li = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (q, &li) in levels.iter_mut().zip(l.iter()) {
        *q = (li + nmax) as u8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        for (v, want) in [(0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (3.49, 3), (-3.51, -4), (0.0, 0)] {
            assert_eq!(nearest_int(v), want, "{v}");
        }
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
        assert_eq!(nearest_int(1e10), i32::MAX, "saturates beyond ggml's range");
        assert_eq!(nearest_int(f32::NAN), 0);
    }

    #[test]
    fn qkx2_constant_block_is_exact() {
        // All values equal and positive: min is clamped to 0, max > min, levels all nmax.
        let x = [0.75f32; 32];
        let w = [1.0f32; 32];
        let mut l = [0u8; 32];
        let grid = Grid { rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false };
        let (scale, min) = make_qkx2_quants(&x, &w, 15, &mut l, &grid);
        assert!(l.iter().all(|&q| q == 15));
        assert!((scale * 15.0 - 0.75).abs() < 1e-6 && min == 0.0, "{scale} {min}");
    }

    #[test]
    fn qx_and_q3_map_the_extreme_to_minus_nmax() {
        let mut x = [0.0f32; 16];
        x[3] = 2.0;
        x[7] = -1.0;
        let mut l = [0u8; 16];
        let scale = make_qx_quants(&x, 32, &mut l);
        assert_eq!(l[3], 0, "x = 2 is level -32 (stored 0)");
        assert!((scale * -32.0 - 2.0).abs() < 1e-5, "{scale}");
        let scale = make_q3_quants(&x, 4, &mut l);
        assert_eq!(l[3], 0, "x = 2 is level -4 (stored 0)");
        assert!((scale * -4.0 - 2.0).abs() < 1e-5, "{scale}");
    }
}
