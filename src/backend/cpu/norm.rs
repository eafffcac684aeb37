//! RMSNorm on the CPU: whole rows (`rms_norm`) and per head fused with RoPE (`rms_norm_rope`).
//!
//! Numerics follow ggml's `ggml_compute_forward_rms_norm_f32`: squares in f32, summed in f64,
//! scale = 1 / sqrtf(mean + eps) in f32, y = (x · scale) · gain. The f64 sum uses 8 lanes and a
//! fixed tree, so it vectorizes and never depends on the number of rows (batch invariance).

use rayon::prelude::*;

use crate::backend::{Tensor, check};
use crate::error::Result;

use super::Cpu;
use super::buffer::{f32s, f32s_mut};

/// Rows per rayon task: a row is only d multiply-adds, so batch a few.
const ROWS_PER_TASK: usize = 8;

/// 1 / sqrt(mean(x²) + eps).
pub fn inv_rms(x: &[f32], eps: f32) -> f32 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            acc[l] += f64::from(c[l] * c[l]);
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for &v in chunks.remainder() {
        sum += f64::from(v * v);
    }
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// dst = (x · inv_rms(x)) · gain for one row (or one head).
fn norm_row(x: &[f32], gain: &[f32], eps: f32, dst: &mut [f32]) {
    let scale = inv_rms(x, eps);
    for ((y, &v), &g) in dst.iter_mut().zip(x).zip(gain) {
        *y = (v * scale) * g;
    }
}

/// See [`crate::Backend::rms_norm`].   x, dst: [rows, d]; gain: [1, d]
pub fn rms_norm(x: &Tensor<Cpu>, gain: &Tensor<Cpu>, eps: f32, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "rms_norm";
    let d = x.cols;
    check::rms_norm(x, gain, dst)?;
    let (x, gain, dst) = (f32s(op, x)?, f32s(op, gain)?, f32s_mut(op, dst)?);
    if d == 0 {
        return Ok(());
    }
    dst.par_chunks_mut(d).with_min_len(ROWS_PER_TASK).zip(x.par_chunks(d)).for_each(|(dst_row, x_row)| {
        norm_row(x_row, gain, eps, dst_row);
    });
    Ok(())
}
