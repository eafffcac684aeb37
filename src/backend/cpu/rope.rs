//! Rotary position embedding on the CPU (arXiv:2104.09864), both ggml pair layouts.
//!
//! Angles follow ggml's `ggml_rope_cache_init` (ext_factor = 0, attn_factor = 1), all in f32:
//! theta_0 = pos, theta_{i+1} = theta_i · theta_scale with theta_scale = powf(base, -2 / n_rot),
//! angle_i = freq_scale · (theta_i / factor_i) (factor_i = 1 without frequency factors: ggml's
//! `rope_yarn(theta / ff, …)`), then cosf/sinf. Pair i of the "normal" style is
//! (x[2i], x[2i+1]); of "neox", (x[i], x[i + n_rot/2]). Dims ≥ n_rot pass through.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::backend::{Rope, RopeStyle, Tensor, check};
use crate::error::Result;

use super::Cpu;
use super::buffer::{f32s, f32s_mut, u32s};
use super::norm::inv_rms;

thread_local! {
    /// (cos, sin) of each rotated pair for the current position: [n_rot / 2, 2].
    static ANGLES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with the (cos, sin) table of position `pos`, kept in thread-local scratch.
/// factors: [n_rot / 2] or empty (all 1).
pub fn with_angles<R>(pos: u32, rope: &Rope, factors: &[f32], f: impl FnOnce(&[f32]) -> R) -> R {
    ANGLES.with_borrow_mut(|angles| {
        angles.clear();
        let theta_scale = rope.theta.powf(-2.0 / rope.n_rot as f32);
        let mut theta = pos as f32;
        for i in 0..rope.n_rot / 2 {
            let angle = rope.freq_scale * factors.get(i).map_or(theta, |&ff| theta / ff);
            angles.extend([angle.cos(), angle.sin()]);
            theta *= theta_scale;
        }
        f(angles)
    })
}

/// Rotates one head in place.   head: [head_dim]; angles: [n_rot / 2, 2]
pub fn rotate(head: &mut [f32], angles: &[f32], rope: &Rope) {
    let half = rope.n_rot / 2;
    for (i, cs) in angles.chunks_exact(2).enumerate() {
        let (cos, sin) = (cs[0], cs[1]);
        let (a, b) = match rope.style {
            RopeStyle::Normal => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * cos - x1 * sin;
        head[b] = x0 * sin + x1 * cos;
    }
}

/// See [`crate::Backend::rope`].   x: [n_tokens, n_heads · head_dim]; pos: u32 [n_tokens, 1]
pub fn rope(x: &mut Tensor<Cpu>, pos: &Tensor<Cpu>, rope: &Rope, factors: Option<&Tensor<Cpu>>) -> Result<()> {
    let op = "rope";
    check::rope(op, x, pos, rope, factors)?;
    let pos = u32s(op, pos)?;
    let factors = factors.map_or(Ok(&[][..]), |f| f32s(op, f))?;
    for_each_head(op, x, pos, rope, factors, |head, angles| rotate(head, angles, rope))
}

/// Calls `f(head, angles)` for every head of every row of x, with the (cos, sin) table of the
/// row's position; rows run in parallel.
fn for_each_head(
    op: &'static str,
    x: &mut Tensor<Cpu>,
    pos: &[u32],
    rope: &Rope,
    factors: &[f32],
    f: impl Fn(&mut [f32], &[f32]) + Sync,
) -> Result<()> {
    let cols = x.cols;
    let x = f32s_mut(op, x)?;
    if x.is_empty() {
        return Ok(());
    }
    x.par_chunks_mut(cols).zip(pos.par_iter()).for_each(|(row, &p)| {
        with_angles(p, rope, factors, |angles| row.chunks_exact_mut(rope.head_dim).for_each(|h| f(h, angles)));
    });
    Ok(())
}

/// See [`crate::Backend::rms_norm_rope`].   x: [n_tokens, n_heads · head_dim]; gain: [1, head_dim];
/// pos: u32 [n_tokens, 1]
pub fn rms_norm_rope(
    x: &mut Tensor<Cpu>,
    gain: &Tensor<Cpu>,
    eps: f32,
    pos: &Tensor<Cpu>,
    rope: &Rope,
    factors: Option<&Tensor<Cpu>>,
) -> Result<()> {
    let op = "rms_norm_rope";
    check::rms_norm_rope(x, gain, pos, rope, factors)?;
    let (gain, pos) = (f32s(op, gain)?, u32s(op, pos)?);
    let factors = factors.map_or(Ok(&[][..]), |f| f32s(op, f))?;
    for_each_head(op, x, pos, rope, factors, |head, angles| {
        let scale = inv_rms(head, eps);
        for (v, &g) in head.iter_mut().zip(gain) {
            *v = (*v * scale) * g;
        }
        rotate(head, angles, rope);
    })
}
