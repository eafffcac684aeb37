//! Sampling ops on the CPU: greedy argmax and top-k with log-sum-exp, per row. These are the
//! references the GPU kernels are read against.

use std::cmp::Ordering;

use rayon::prelude::*;

use crate::backend::{Tensor, check, sanitize};
use crate::error::Result;

use super::Cpu;
use super::buffer::{f32s, f32s_mut, u32s_mut};

/// See [`crate::Backend::argmax`].   x: [rows, vocab]; dst: u32 [rows, 1]
/// The first maximum wins (lowest index on ties); NaN never compares greater.
pub fn argmax(x: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "argmax";
    let vocab = x.cols;
    check::argmax(x, dst)?;
    let (x, dst) = (f32s(op, x)?, u32s_mut(op, dst)?);
    dst.par_iter_mut().zip(x.par_chunks(vocab)).for_each(|(best, row)| {
        let mut best_j = 0;
        for (j, &v) in row.iter().enumerate().skip(1) {
            if v > row[best_j] {
                best_j = j;
            }
        }
        *best = best_j as u32;
    });
    Ok(())
}

/// See [`crate::Backend::top_k`].   x: [rows, vocab]; ids: u32 [rows, k]; vals: [rows, k + 1]
pub fn top_k(x: &Tensor<Cpu>, ids: &mut Tensor<Cpu>, vals: &mut Tensor<Cpu>) -> Result<()> {
    let op = "top_k";
    let (k, vocab) = (check::top_k(x, ids, vals)?, x.cols);
    let (x, ids, vals) = (f32s(op, x)?, u32s_mut(op, ids)?, f32s_mut(op, vals)?);
    let rows = x.par_chunks(vocab).zip(ids.par_chunks_mut(k)).zip(vals.par_chunks_mut(k + 1));
    rows.for_each(|((row, ids), vals)| top_k_row(row, ids, vals));
    Ok(())
}

/// One row: select the k best (value, index) pairs, sort them, then append the log-sum-exp.
fn top_k_row(row: &[f32], ids: &mut [u32], vals: &mut [f32]) {
    let k = ids.len();
    let mut pairs: Vec<(f32, u32)> = row.iter().enumerate().map(|(j, &v)| (sanitize(v), j as u32)).collect();
    if k < pairs.len() {
        pairs.select_nth_unstable_by(k - 1, by_rank);
        pairs.truncate(k);
    }
    pairs.sort_unstable_by(by_rank);
    for (i, &(v, j)) in pairs.iter().enumerate() {
        (ids[i], vals[i]) = (j, v);
    }
    vals[k] = log_sum_exp(row);
}

/// Higher value first, then lower index (the sampler's order; sanitized values have no NaN or −0).
fn by_rank(a: &(f32, u32), b: &(f32, u32)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// ln Σ_j exp(row[j]) by one pass with a running max and a sum scaled to it, in f64 so that this
/// reference is far more accurate than the f32 kernels it is compared with. −∞ when all are −∞.
fn log_sum_exp(row: &[f32]) -> f32 {
    let (mut max, mut sum) = (f64::NEG_INFINITY, 0.0f64);
    for v in row.iter().map(|&v| f64::from(sanitize(v))).filter(|&v| v > f64::NEG_INFINITY) {
        if v > max {
            // The first finite value finds sum = 0, and 0 · exp(−∞) = 0.
            sum = sum * (max - v).exp() + 1.0;
            max = v;
        } else {
            sum += (v - max).exp();
        }
    }
    (max + sum.ln()) as f32
}
