//! Rotary embeddings on CUDA: `cuda/rope.cu` and `cuda/rms_norm_rope.cu`, one block per (token, head).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::Cuda;
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::{Rope, RopeStyle, Tensor, check};
use crate::error::Result;

/// The launch over n_tokens · n_heads blocks (of checked arguments), None when empty.
fn geometry(x: &Tensor<Cuda>, rope: &Rope) -> Option<(LaunchConfig, u32)> {
    let n_heads = x.cols / rope.head_dim;
    let blocks = x.rows * n_heads;
    if blocks == 0 {
        return None;
    }
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    Some((cfg, n_heads as u32))
}

/// Null for "no frequency factors" (the kernels test the pointer).
const NO_FACTORS: u64 = 0;

pub fn rope(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    pos: &Tensor<Cuda>,
    rope: &Rope,
    factors: Option<&Tensor<Cuda>>,
) -> Result<()> {
    check::rope("rope", x, pos, rope, factors)?;
    let Some((cfg, n_heads)) = geometry(x, rope) else { return Ok(()) };
    let f = cuda.function(Module::Rope, entry::ROPE)?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    match factors {
        Some(f) => l.arg(&f.buf.dev),
        None => l.arg(&NO_FACTORS),
    };
    // SAFETY: arguments match cuda/rope.cu; x holds rows · n_heads · head_dim floats, pos rows u32,
    // factors (a device pointer, or null) n_rot / 2 floats (check::rope).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

pub fn rms_norm_rope(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    gain: &Tensor<Cuda>,
    eps: f32,
    pos: &Tensor<Cuda>,
    rope: &Rope,
    factors: Option<&Tensor<Cuda>>,
) -> Result<()> {
    check::rms_norm_rope(x, gain, pos, rope, factors)?;
    let Some((cfg, n_heads)) = geometry(x, rope) else { return Ok(()) };
    let f = cuda.function(Module::RmsNormRope, entry::RMS_NORM_ROPE)?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&gain.buf.dev).arg(&eps).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    match factors {
        Some(f) => l.arg(&f.buf.dev),
        None => l.arg(&NO_FACTORS),
    };
    // SAFETY: arguments match cuda/rms_norm_rope.cu; x holds rows · n_heads · head_dim floats, gain
    // head_dim, factors (a device pointer, or null) n_rot / 2 floats.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
