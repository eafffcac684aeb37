//! The factor GPTQ needs: U upper triangular with H⁻¹ = UᵀU (torch's `cholesky(H⁻¹, upper=True)`),
//! without forming H⁻¹. With P the index reversal, P·H·P = L·Lᵀ gives H = R·Rᵀ for the upper
//! R = P·L·P, so H⁻¹ = R⁻ᵀ·R⁻¹ and U = R⁻¹ = P·L⁻¹·P: one Cholesky and one triangular inverse,
//! in f64, rows of the Cholesky and column blocks of the inverse in parallel.

use rayon::prelude::*;

use crate::error::{Error, Result};

fn dot64(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Lower L with a = L·Lᵀ ([k, k] row-major, symmetric positive definite), in place of a's lower
/// triangle; an error when a pivot is not positive (a is not positive definite).
fn cholesky_in_place(a: &mut [f64], k: usize) -> Result<()> {
    for j in 0..k {
        let (top, bottom) = a.split_at_mut((j + 1) * k);
        let row_j = &mut top[j * k..];
        let s = row_j[j] - dot64(&row_j[..j], &row_j[..j]);
        if !(s > 0.0 && s.is_finite()) {
            return Err(Error::InvalidArgument(format!("cholesky: pivot {j} is {s}: not positive definite")));
        }
        row_j[j] = s.sqrt();
        let (lj, d) = (&row_j[..j], row_j[j]);
        bottom.par_chunks_mut(k).with_min_len(32).for_each(|row| row[j] = (row[j] - dot64(&row[..j], lj)) / d);
    }
    for i in 0..k {
        a[i * k + i + 1..(i + 1) * k].fill(0.0);
    }
    Ok(())
}

/// L⁻¹ of a lower-triangular L, by forward substitution, columns in blocks of 64.
fn lower_inverse(l: &[f64], k: usize) -> Vec<f64> {
    const BLOCK: usize = 64;
    let blocks: Vec<(usize, Vec<f64>)> = (0..k.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let (c0, c1) = (b * BLOCK, ((b + 1) * BLOCK).min(k));
            let w = c1 - c0;
            let mut x = vec![0f64; k * w]; // rows of L⁻¹[:, c0..c1]
            for i in c0..k {
                let mut acc = vec![0f64; w];
                if i < c1 {
                    acc[i - c0] = 1.0;
                }
                for m in c0..i {
                    let lim = l[i * k + m];
                    if lim != 0.0 {
                        for (a, &v) in acc.iter_mut().zip(&x[m * w..(m + 1) * w]) {
                            *a -= lim * v;
                        }
                    }
                }
                let d = l[i * k + i];
                for (o, a) in x[i * w..(i + 1) * w].iter_mut().zip(acc) {
                    *o = a / d;
                }
            }
            (c0, x)
        })
        .collect();
    let mut inv = vec![0f64; k * k];
    for (c0, x) in blocks {
        let w = x.len() / k;
        for i in 0..k {
            inv[i * k + c0..i * k + c0 + w].copy_from_slice(&x[i * w..(i + 1) * w]);
        }
    }
    inv
}

/// U (f32, [k, k] upper triangular) with UᵀU = h⁻¹, for a symmetric positive definite h.
pub fn inverse_cholesky_upper(h: &[f64], k: usize) -> Result<Vec<f32>> {
    let rev = |i: usize, j: usize| (k - 1 - i) * k + (k - 1 - j);
    let mut a: Vec<f64> = (0..k * k).map(|x| h[rev(x / k, x % k)]).collect();
    cholesky_in_place(&mut a, k)?;
    let linv = lower_inverse(&a, k);
    Ok((0..k * k).map(|x| linv[rev(x / k, x % k)] as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_transpose_u_inverts_h() {
        let k = 70; // more than one column block
        // h = B·Bᵀ + I for a fixed pseudo-random B: symmetric positive definite, not diagonal.
        let b: Vec<f64> = (0..k * k).map(|i| (((i * 2654435761usize) % 1000) as f64 / 500.0) - 1.0).collect();
        let mut h = vec![0f64; k * k];
        for i in 0..k {
            for j in 0..k {
                h[i * k + j] =
                    (0..k).map(|t| b[i * k + t] * b[j * k + t]).sum::<f64>() + if i == j { 1.0 } else { 0.0 };
            }
        }
        let u = inverse_cholesky_upper(&h, k).unwrap();
        for i in 0..k {
            for j in 0..i {
                assert_eq!(u[i * k + j], 0.0, "U is upper triangular");
            }
        }
        // (UᵀU)·h = I, to f32's precision of U scaled by h's size.
        let scale = h.iter().fold(0f64, |m, v| m.max(v.abs()));
        for i in 0..k {
            for j in 0..k {
                let mut s = 0f64;
                for t in 0..k {
                    let hinv_it: f64 = (0..k).map(|r| u[r * k + i] as f64 * u[r * k + t] as f64).sum();
                    s += hinv_it * h[t * k + j];
                }
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((s - want).abs() < 1e-4 * scale, "({i}, {j}): {s}");
            }
        }
        let mut bad = h.clone();
        bad[0] = -1.0;
        assert!(inverse_cholesky_upper(&bad, k).is_err());
    }
}
