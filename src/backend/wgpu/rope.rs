//! Rotary embeddings (`shaders/rope.wgsl`) and the fused per-head RMSNorm + RoPE
//! (`shaders/rms_norm_rope.wgsl`), both in place, normal and neox pairings.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Rope, RopeStyle, Tensor, check};
use crate::error::Result;

/// The shared leading parameters: [n_tokens, n_heads, head_dim, n_rot, theta, freq_scale, neox,
/// has_ff] (of checked arguments).
fn rope_params(x: &Tensor<Wgpu>, rope: &Rope, factors: Option<&Tensor<Wgpu>>) -> [u32; 8] {
    let neox = (rope.style == RopeStyle::Neox) as u32;
    let n_heads = (x.cols / rope.head_dim) as u32;
    [
        x.rows as u32,
        n_heads,
        rope.head_dim as u32,
        rope.n_rot as u32,
        rope.theta.to_bits(),
        rope.freq_scale.to_bits(),
        neox,
        factors.is_some() as u32,
    ]
}

pub fn rope(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    pos: &Tensor<Wgpu>,
    rope: &Rope,
    factors: Option<&Tensor<Wgpu>>,
) -> Result<()> {
    check::rope("rope", x, pos, rope, factors)?;
    let p = rope_params(x, rope, factors);
    let threads = x.rows * p[1] as usize * rope.n_rot / 2;
    // Without factors the kernel never reads its `ff` binding: pos (read-only too) stands in.
    let ff = factors.map_or(&pos.buf, |f| &f.buf);
    be.ctx.dispatch(Variant::plain(Kernel::Rope), &[&x.buf, &pos.buf, ff], &p, be.ctx.grid_1d(threads))
}

pub fn rms_norm_rope(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    pos: &Tensor<Wgpu>,
    rope: &Rope,
    factors: Option<&Tensor<Wgpu>>,
) -> Result<()> {
    check::rms_norm_rope(x, gain, pos, rope, factors)?;
    let p = rope_params(x, rope, factors);
    let params = [p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], eps.to_bits()];
    let v = Variant::plain(Kernel::RmsNormRope);
    let ff = factors.map_or(&pos.buf, |f| &f.buf);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &pos.buf, ff], &params, [p[1], x.rows as u32, 1])
}
