//! Rotary embeddings on CUDA: `cuda/rope.cu` and `cuda/rms_norm_rope.cu`, one block per (token, head).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::{Cuda, driver};
use super::source::Module;
use crate::backend::{DType, Rope, RopeStyle, Tensor, expect_shape};
use crate::error::{Error, Result};

/// Checks the shapes and returns the launch over n_tokens · n_heads blocks.
fn geometry(
    op: &'static str,
    x: &Tensor<Cuda>,
    pos: &Tensor<Cuda>,
    rope: &Rope,
) -> Result<Option<(LaunchConfig, u32)>> {
    if rope.head_dim == 0
        || !x.cols.is_multiple_of(rope.head_dim)
        || rope.n_rot > rope.head_dim
        || !rope.n_rot.is_multiple_of(2)
    {
        return Err(Error::InvalidArgument(format!(
            "{op}: {} columns, head_dim {}, n_rot {}",
            x.cols, rope.head_dim, rope.n_rot
        )));
    }
    expect_shape(op, pos, x.rows, 1)?;
    if pos.dtype != DType::U32 {
        return Err(Error::InvalidArgument(format!("{op}: positions must be u32")));
    }
    let n_heads = x.cols / rope.head_dim;
    let blocks = x.rows * n_heads;
    if blocks == 0 {
        return Ok(None);
    }
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    Ok(Some((cfg, n_heads as u32)))
}

pub fn rope(cuda: &Cuda, x: &mut Tensor<Cuda>, pos: &Tensor<Cuda>, rope: &Rope) -> Result<()> {
    let Some((cfg, n_heads)) = geometry("rope", x, pos, rope)? else { return Ok(()) };
    let f = cuda.function(Module::Rope, "rope")?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    // SAFETY: arguments match cuda/rope.cu; x holds rows · n_heads · head_dim floats, pos rows u32.
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
) -> Result<()> {
    expect_shape("rms_norm_rope", gain, 1, rope.head_dim)?;
    let Some((cfg, n_heads)) = geometry("rms_norm_rope", x, pos, rope)? else { return Ok(()) };
    let f = cuda.function(Module::RmsNormRope, "rms_norm_rope")?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&gain.buf.dev).arg(&eps).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    // SAFETY: arguments match cuda/rms_norm_rope.cu; x holds rows · n_heads · head_dim floats, gain head_dim.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
