//! Importance-weighted parameter search per group: the header (INT's (d, z), NF4's scale) that
//! minimises Σ_j h_j (x_j − x̂_j)² for per-value weights h_j, which calibration supplies as
//! diag(Σ xᵀx) of the matrix's input (the output error of the group when inputs are
//! uncorrelated). The plain quantizers (`quantize.rs`) weigh every value by rms + |x| instead.
//! The layout is unchanged: only which header a group gets, and its codes, differ.
//!
//! - INT-b: candidates are min/max (so the error is never above min/max's under h), and the
//!   levels of 21 stretched grids `round((x − lo)·(n + δ)/(hi − lo))`, δ = -1, -0.9, …, 1 (as
//!   llama.cpp's `make_qkx2_quants` starts its k-quant search); each start alternates a weighted
//!   least-squares line x ≈ a·q + b (z = clamp(round(−b/a), 0, n)), the weighted least-squares d
//!   for that z and a reassignment of the levels, up to [`ROUNDS`] times while the error falls;
//!   the best (d, z) finally tries z ± 1 with its own least-squares d.
//! - NF4: scales absmax·(0.75 + 0.02·i), i = 0 … 15, plus absmax itself; each is followed by a
//!   weighted least-squares refit s' = Σ h·x·c / Σ h·c² of the scale given its codes c (as
//!   llama.cpp's `quantize_row_iq4_nl_impl` refits), then the codes are reassigned under s'.
//!   Scales are compared after f16 rounding when they are stored as f16.
//!
//! Ties keep the earlier candidate; d, z and codes follow `quantize.rs`'s rounding otherwise.

use half::f16;

use super::NF4;
use super::quantize::{assign, fit_line, fit_scale, nf4_code, scale_f16};
use super::round::round;

/// Alternations of (levels → least-squares d, z) per INT start.
const ROUNDS: usize = 4;

/// The (d, z) of least Σ w·e² for an INT-b group (module doc); None when every value is 0 (or
/// no scale is representable), which the caller writes as d = 0, z = 0, q = 0.
pub(super) fn int_header(x: &[f32], w: &[f32], n: f32) -> Option<(f16, f32)> {
    let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
    let hi = x.iter().fold(0.0f32, |m, &v| m.max(v));
    let mut levels = vec![0u8; x.len()];
    let mut best: Option<(f32, f16, f32)> = None;
    // Evaluates (d, z), leaving its levels in `levels`; returns its error (∞ if d is unusable).
    let consider = |d: f16, z: f32, levels: &mut [u8], best: &mut Option<(f32, f16, f32)>| {
        let dq = d.to_f32();
        if !(dq > 0.0 && dq.is_finite()) {
            return f32::INFINITY;
        }
        let err = assign(x, w, dq, z, n, levels);
        if best.is_none_or(|(e, _, _)| err < e) {
            *best = Some((err, d, z));
        }
        err
    };
    let d0 = scale_f16((hi - lo) / n);
    consider(d0, round(-lo / d0.to_f32()).clamp(0.0, n), &mut levels, &mut best);
    if hi <= lo {
        return best.map(|(_, d, z)| (d, z));
    }
    for step in 0..=20 {
        let iscale = (n - 1.0 + 0.1 * step as f32) / (hi - lo);
        for (l, &v) in levels.iter_mut().zip(x) {
            *l = round((v - lo) * iscale).clamp(0.0, n) as u8;
        }
        let mut last = f32::INFINITY;
        for _ in 0..ROUNDS {
            let Some((a, b)) = fit_line(x, w, &levels).filter(|&(a, _)| a > 0.0) else { break };
            let z = round(-b / a).clamp(0.0, n);
            let Some(d) = fit_scale(x, w, &levels, z) else { break };
            let err = consider(scale_f16(d), z, &mut levels, &mut best);
            if err >= last {
                break;
            }
            last = err;
        }
    }
    let (_, d, z) = best?;
    assign(x, w, d.to_f32(), z, n, &mut levels);
    for z in [z - 1.0, z + 1.0].into_iter().filter(|z| (0.0..=n).contains(z)) {
        let mut l = levels.clone();
        for _ in 0..2 {
            let Some(d) = fit_scale(x, w, &l, z) else { break };
            consider(scale_f16(d), z, &mut l, &mut best);
        }
    }
    best.map(|(_, d, z)| (d, z))
}

/// Σ w·(s·NF4[c] − x)² with c the nearest codes under s, and Σ w·x·NF4[c], Σ w·NF4[c]² (the
/// least-squares refit's sums).
fn nf4_error(x: &[f32], w: &[f32], s: f32) -> (f32, f64, f64) {
    let (mut err, mut sxc, mut scc) = (0.0f32, 0.0f64, 0.0f64);
    for (&v, &w) in x.iter().zip(w) {
        let c = NF4[nf4_code(v / s) as usize];
        err += w * (s * c - v).powi(2);
        (sxc, scc) = (sxc + (w * v * c) as f64, scc + (w * c * c) as f64);
    }
    (err, sxc, scc)
}

/// The NF4 scale of least Σ w·e² (module doc), rounded to f16 when `stored`; 0 for a group of
/// zeros.
pub(super) fn nf4_scale(x: &[f32], w: &[f32], stored: bool) -> f32 {
    let absmax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let round = |s: f32| if stored { scale_f16(s).to_f32() } else { s };
    let mut best = (f32::INFINITY, round(absmax));
    let try_scale = |s: f32, best: &mut (f32, f32)| {
        let s = round(s);
        if !(s > 0.0 && s.is_finite()) {
            return None;
        }
        let (err, sxc, scc) = nf4_error(x, w, s);
        if err < best.0 {
            *best = (err, s);
        }
        (scc > 0.0).then(|| (sxc / scc) as f32)
    };
    let starts = std::iter::once(1.0).chain((0..16).map(|i| 0.75 + 0.02 * i as f32));
    for f in starts {
        if let Some(refit) = try_scale(absmax * f, &mut best) {
            try_scale(refit, &mut best);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::simd::noise;
    use crate::quant::intn::quantize::nf4_code;
    use crate::quant::intn::{
        Group, Intn, Scheme, dequantize_block_row, quantize_block_row, quantize_block_row_weighted,
    };

    /// `n` values in [-1, 1) from the shared byte noise, with a few outliers.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        noise(n, seed)
            .iter()
            .enumerate()
            .map(|(i, &b)| (b as f32 / 128.0 - 1.0) * if i % 37 == 0 { 4.0 } else { 1.0 })
            .collect()
    }

    /// Importances spread over two orders of magnitude, as diag(Σ xᵀx) is.
    fn importance(n: usize, seed: u64) -> Vec<f32> {
        noise(n, seed).iter().map(|&b| 10f32.powf(b as f32 / 128.0 - 1.0)).collect()
    }

    fn weighted_error(f: Intn, x: &[f32], h: &[f32], bytes: &[u8]) -> f64 {
        let mut y = vec![0f32; x.len()];
        dequantize_block_row(f, bytes, &mut y);
        x.iter().zip(&y).zip(h).map(|((&a, &b), &h)| h as f64 * (a as f64 - b as f64).powi(2)).sum()
    }

    /// Min/max round-to-nearest (INT) or absmax (NF4), one group: the plain baseline.
    fn baseline(f: Intn, x: &[f32], dst: &mut [u8]) {
        match f.scheme {
            Scheme::Nf4 => {
                let s = scale_f16(x.iter().fold(0.0f32, |m, v| m.max(v.abs())));
                dst[..4].copy_from_slice(&[s.to_le_bytes()[0], s.to_le_bytes()[1], 0, 0]);
                let q: Vec<u8> = x.iter().map(|&v| nf4_code(v / s.to_f32())).collect();
                super::super::pack_block(f, &q, &mut dst[4..]);
            }
            _ => {
                let n = ((1u32 << f.scheme.bits()) - 1) as f32;
                let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
                let hi = x.iter().fold(0.0f32, |m, &v| m.max(v));
                let d = scale_f16((hi - lo) / n);
                let z = round(-lo / d.to_f32()).clamp(0.0, n);
                let mut q = vec![0u8; x.len()];
                assign(x, &vec![1.0; x.len()], d.to_f32(), z, n, &mut q);
                dst[..4].copy_from_slice(&[d.to_le_bytes()[0], d.to_le_bytes()[1], z as u8, 0]);
                super::super::pack_block(f, &q, &mut dst[4..]);
            }
        }
    }

    #[test]
    fn never_worse_than_plain_rounding_and_better_than_the_unweighted_search() {
        for scheme in [Scheme::Int8, Scheme::Int4, Scheme::Int2, Scheme::Nf4] {
            let f = Intn::new(scheme, Group::G128);
            let (mut plain_total, mut weighted_total) = (0.0, 0.0);
            for seed in 0..64 {
                let x = values(128, seed);
                let h = importance(128, 1000 + seed);
                let (mut ours, mut base, mut plain) = ([0u8; 68 + 64], [0u8; 68 + 64], [0u8; 68 + 64]);
                let bb = f.block_bytes();
                quantize_block_row_weighted(f, &x, &h, &mut ours[..bb]);
                baseline(f, &x, &mut base[..bb]);
                quantize_block_row(f, &x, &mut plain[..bb]);
                let (e_ours, e_base) = (weighted_error(f, &x, &h, &ours[..bb]), weighted_error(f, &x, &h, &base[..bb]));
                assert!(e_ours <= e_base * (1.0 + 1e-6), "{} seed {seed}: {e_ours} > min/max {e_base}", f.name());
                weighted_total += e_ours;
                plain_total += weighted_error(f, &x, &h, &plain[..bb]);
            }
            // The unweighted search optimises another objective: on this one it must lose clearly.
            assert!(weighted_total < 0.95 * plain_total, "{}: {weighted_total} vs {plain_total}", f.name());
        }
    }

    #[test]
    fn nf4_refit_is_the_weighted_least_squares_scale() {
        let (x, h) = (values(128, 5), importance(128, 6));
        let s = 1.7f32;
        let (err, sxc, scc) = nf4_error(&x, &h, s);
        // Exact reference in f64: codes under s, then Σ h·x·c / Σ h·c².
        let codes: Vec<f64> = x.iter().map(|&v| NF4[nf4_code(v / s) as usize] as f64).collect();
        let num: f64 = x.iter().zip(&codes).zip(&h).map(|((&v, &c), &h)| h as f64 * v as f64 * c).sum();
        let den: f64 = codes.iter().zip(&h).map(|(&c, &h)| h as f64 * c * c).sum();
        assert!((sxc - num).abs() < 1e-4 * num.abs() && (scc - den).abs() < 1e-4 * den, "{sxc} {num} {scc} {den}");
        let want: f64 =
            x.iter().zip(&codes).zip(&h).map(|((&v, &c), &h)| h as f64 * (s as f64 * c - v as f64).powi(2)).sum();
        assert!((err as f64 - want).abs() < 1e-4 * want);
        // With the codes fixed, the refit scale's error is below that at any other scale.
        let at = |t: f64| -> f64 {
            x.iter().zip(&codes).zip(&h).map(|((&v, &c), &h)| h as f64 * (t * c - v as f64).powi(2)).sum()
        };
        let refit = num / den;
        for t in [0.9 * refit, 0.99 * refit, 1.01 * refit, 1.1 * refit, s as f64] {
            assert!(at(refit) <= at(t), "refit {refit}: {} vs {t}: {}", at(refit), at(t));
        }
    }

    #[test]
    fn zeros_and_dead_weights_give_finite_headers() {
        for scheme in [Scheme::Int4, Scheme::Nf4, Scheme::Nf4Dq] {
            let f = Intn::new(scheme, Group::G32);
            let mut dst = vec![0u8; 4 * f.block_bytes() / f.scheme.groups_per_block()];
            let x = vec![0f32; 4 * 32];
            quantize_block_row_weighted(f, &x, &vec![1.0; 128], &mut dst);
            let mut y = vec![1f32; 128];
            dequantize_block_row(f, &dst, &mut y);
            assert!(y.iter().all(|&v| v == 0.0), "{}", f.name());
            let x = values(128, 9);
            quantize_block_row_weighted(f, &x, &vec![0.0; 128], &mut dst);
            dequantize_block_row(f, &dst, &mut y);
            assert!(y.iter().all(|v| v.is_finite()), "{}", f.name());
        }
    }
}
