//! Rotary embeddings (`shaders/rope.wgsl`) and the fused per-head RMSNorm + RoPE
//! (`shaders/rms_norm_rope.wgsl`), both in place, normal and neox pairings.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{DType, Rope, RopeStyle, Tensor, expect_shape};
use crate::error::{Error, Result};

/// The shared leading parameters: [n_tokens, n_heads, head_dim, n_rot, theta, freq_scale, neox].
fn rope_params(be: &Wgpu, x: &Tensor<Wgpu>, pos: &Tensor<Wgpu>, rope: &Rope) -> Result<[u32; 7]> {
    expect_shape("rope", pos, x.rows, 1)?;
    be.expect_dtypes("rope", &[(x, DType::F32), (pos, DType::U32)])?;
    if rope.head_dim == 0
        || !x.cols.is_multiple_of(rope.head_dim)
        || rope.n_rot > rope.head_dim
        || !rope.n_rot.is_multiple_of(2)
    {
        return Err(Error::InvalidArgument(format!("rope: {rope:?} does not fit rows of {}", x.cols)));
    }
    let neox = (rope.style == RopeStyle::Neox) as u32;
    let n_heads = (x.cols / rope.head_dim) as u32;
    Ok([
        x.rows as u32,
        n_heads,
        rope.head_dim as u32,
        rope.n_rot as u32,
        rope.theta.to_bits(),
        rope.freq_scale.to_bits(),
        neox,
    ])
}

pub fn rope(be: &Wgpu, x: &mut Tensor<Wgpu>, pos: &Tensor<Wgpu>, rope: &Rope) -> Result<()> {
    let p = rope_params(be, x, pos, rope)?;
    let threads = x.rows * p[1] as usize * rope.n_rot / 2;
    be.ctx.dispatch(Variant::plain(Kernel::Rope), &[&x.buf, &pos.buf], &p, be.ctx.grid_1d(threads))
}

pub fn rms_norm_rope(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    pos: &Tensor<Wgpu>,
    rope: &Rope,
) -> Result<()> {
    let p = rope_params(be, x, pos, rope)?;
    expect_shape("rms_norm_rope", gain, 1, rope.head_dim)?;
    let params = [p[0], p[1], p[2], p[3], p[4], p[5], p[6], eps.to_bits()];
    let v = Variant::plain(Kernel::RmsNormRope);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &pos.buf], &params, [p[1], x.rows as u32, 1])
}
