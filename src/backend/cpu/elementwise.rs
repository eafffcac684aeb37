//! Elementwise ops on the CPU: silu_mul, gelu_mul, add_assign, add_bias, gather_rows. No reductions, so
//! any split is batch invariant; rows are spread over rayon tasks.

use rayon::prelude::*;

use crate::backend::{Tensor, check};
use crate::error::Result;

use super::buffer::{f32s, f32s_mut, index, u32s};
use super::{Cpu, simd};

/// Elements per rayon task (small ops are not worth a thread hop).
const MIN_TASK: usize = 4096;

/// See [`crate::Backend::silu_mul`]: dst = silu(gate) · up, silu(g) = g / (1 + e^-g).
/// gate, up, dst: [rows, d_ff]
pub fn silu_mul(gate: &Tensor<Cpu>, up: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "silu_mul";
    check::silu_mul(gate, up, dst)?;
    let (gate, up, dst) = (f32s(op, gate)?, f32s(op, up)?, f32s_mut(op, dst)?);
    gated(gate, up, dst, |g, u| g / (1.0 + simd::exp(-g)) * u);
    Ok(())
}

/// dst[i] = f(gate[i], up[i]), in rayon tasks of MIN_TASK elements, each vectorized by
/// [`simd::zip_map`].
fn gated(gate: &[f32], up: &[f32], dst: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    let (gate, up) = (gate.par_chunks(MIN_TASK), up.par_chunks(MIN_TASK));
    dst.par_chunks_mut(MIN_TASK).zip(gate.zip(up)).for_each(|(y, (g, u))| simd::zip_map(g, u, y, &f));
}

/// tanh's argument is clamped to ±10 (tanh(10) rounds to 1 in f32), so every backend gets ±1
/// there rather than a GPU's exp-based tanh overflowing to NaN.
pub const GELU_TANH_CLAMP: f32 = 10.0;

/// gelu_tanh(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³))), HF's `gelu_pytorch_tanh` and
/// ggml's GELU (without its f16 lookup table), in f32 as g / (1 + e^(−2u)): the same function
/// (1 + tanh(u) = 2 / (1 + e^(−2u))), with simd.rs's exp, which vectorizes where libm's tanhf
/// did not (a quarter of Gemma 3's prefill), and without 1 + tanh's cancellation for negative g.
#[inline(always)]
pub fn gelu_tanh(g: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (g + 0.044715 * g * g * g);
    g / (1.0 + simd::exp(-2.0 * u.clamp(-GELU_TANH_CLAMP, GELU_TANH_CLAMP)))
}

/// See [`crate::Backend::gelu_mul`]: dst = gelu_tanh(gate) · up.   gate, up, dst: [rows, d_ff]
pub fn gelu_mul(gate: &Tensor<Cpu>, up: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "gelu_mul";
    check::gelu_mul(gate, up, dst)?;
    let (gate, up, dst) = (f32s(op, gate)?, f32s(op, up)?, f32s_mut(op, dst)?);
    gated(gate, up, dst, |g, u| gelu_tanh(g) * u);
    Ok(())
}

/// See [`crate::Backend::add_assign`].   x, y: [rows, d]
pub fn add_assign(x: &mut Tensor<Cpu>, y: &Tensor<Cpu>) -> Result<()> {
    let op = "add_assign";
    check::add_assign(x, y)?;
    let (x, y) = (f32s_mut(op, x)?, f32s(op, y)?);
    x.par_iter_mut().with_min_len(MIN_TASK).zip(y.par_iter()).for_each(|(a, &b)| *a += b);
    Ok(())
}

/// See [`crate::Backend::add_bias`].   x: [rows, d]; bias: [1, d]
pub fn add_bias(x: &mut Tensor<Cpu>, bias: &Tensor<Cpu>) -> Result<()> {
    let op = "add_bias";
    check::add_bias(x, bias)?;
    let d = x.cols;
    let (x, bias) = (f32s_mut(op, x)?, f32s(op, bias)?);
    if d == 0 {
        return Ok(());
    }
    x.par_chunks_mut(d).with_min_len(MIN_TASK.div_ceil(d)).for_each(|row| {
        row.iter_mut().zip(bias).for_each(|(a, &b)| *a += b);
    });
    Ok(())
}

/// See [`crate::Backend::gather_rows`].   x: [rows, d]; rows: u32 [n, 1]; dst: [n, d]
pub fn gather_rows(x: &Tensor<Cpu>, rows: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "gather_rows";
    let (n_rows, d) = (x.rows, x.cols);
    check::gather_rows(x, rows, dst)?;
    let (x, rows, dst) = (f32s(op, x)?, u32s(op, rows)?, f32s_mut(op, dst)?);
    if d == 0 {
        return Ok(());
    }
    for (dst_row, &r) in dst.chunks_exact_mut(d).zip(rows) {
        let r = index(op, "row", r, n_rows)?;
        dst_row.copy_from_slice(&x[r * d..(r + 1) * d]);
    }
    Ok(())
}
