//! The calibration statistic of one matrix input: Σ xᵀx over the calibration tokens (GPTQ's
//! H = 2·XᵀX/N up to a scale, which GPTQ does not depend on: the damping is relative).

use rayon::prelude::*;

use crate::backend::cpu::simd::{dot, dot4x4};
use crate::error::{Error, Result};

/// Σ xᵀx of the `k`-wide rows added so far (f64, the upper triangle; `full` mirrors it).
pub struct Hessian {
    pub k: usize,
    upper: Vec<f64>, // [k, k], entries j >= i
    /// Rows added.
    pub n: usize,
}

impl Hessian {
    pub fn new(k: usize) -> Hessian {
        Hessian { k, upper: vec![0.0; k * k], n: 0 }
    }

    /// Adds the rows of `x` ([x.len() / k, k], row-major): each 4 × 4 tile of XᵀX is one
    /// `dot4x4` over the transposed rows (f32 products over one batch, summed into f64).
    pub fn add(&mut self, x: &[f32]) -> Result<()> {
        let k = self.k;
        if k == 0 || !x.len().is_multiple_of(k) {
            return Err(Error::InvalidArgument(format!("hessian: {} values are not rows of {k}", x.len())));
        }
        let m = x.len() / k;
        let mut xt = vec![0f32; k * m]; // [k, m]
        for (t, row) in x.chunks_exact(k).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                xt[i * m + t] = v;
            }
        }
        let col = |i: usize| &xt[i * m..(i + 1) * m];
        self.upper.par_chunks_mut(4 * k).enumerate().for_each(|(bi, rows)| {
            let i0 = 4 * bi;
            let ni = rows.len() / k;
            let mut j0 = i0;
            while j0 < k {
                let nj = (k - j0).min(4);
                if ni == 4 && nj == 4 {
                    let t = dot4x4(std::array::from_fn(|a| col(i0 + a)), std::array::from_fn(|b| col(j0 + b)));
                    for (a, t) in t.iter().enumerate() {
                        for (b, &v) in t.iter().enumerate() {
                            rows[a * k + j0 + b] += v as f64;
                        }
                    }
                } else {
                    for a in 0..ni {
                        for b in 0..nj {
                            rows[a * k + j0 + b] += dot(col(i0 + a), col(j0 + b)) as f64;
                        }
                    }
                }
                j0 += 4;
            }
        });
        self.n += m;
        Ok(())
    }

    /// The diagonal, Σ x_i² per input i.
    pub fn diag(&self) -> Vec<f64> {
        (0..self.k).map(|i| self.upper[i * self.k + i]).collect()
    }

    /// The whole symmetric matrix [k, k].
    pub fn full(&self) -> Vec<f64> {
        let k = self.k;
        let mut h = self.upper.clone();
        for i in 0..k {
            for j in 0..i {
                h[i * k + j] = h[j * k + i];
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_outer_products() {
        let (k, m) = (6, 5); // not a multiple of 4: the scalar edge tiles too
        let x: Vec<f32> = (0..k * m).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
        let mut h = Hessian::new(k);
        h.add(&x[..3 * k]).unwrap();
        h.add(&x[3 * k..]).unwrap();
        let full = h.full();
        for i in 0..k {
            for j in 0..k {
                let want: f64 = (0..m).map(|t| x[t * k + i] as f64 * x[t * k + j] as f64).sum();
                assert!((full[i * k + j] - want).abs() < 1e-4, "({i}, {j}): {} vs {want}", full[i * k + j]);
            }
        }
        assert_eq!(h.n, m);
        assert!(h.add(&x[..k + 1]).is_err());
    }
}
