//! Normalization on CUDA: `cuda/rms_norm.cu`, one block per row.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::Cuda;
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn rms_norm(cuda: &Cuda, x: &Tensor<Cuda>, gain: &Tensor<Cuda>, eps: f32, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::rms_norm(x, gain, dst)?;
    if rows == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::RmsNorm, entry::RMS_NORM)?;
    let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let d32 = d as u32;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&gain.buf.dev).arg(&mut dst.buf.dev).arg(&d32).arg(&eps);
    // SAFETY: (x, gain, dst, d, eps) match cuda/rms_norm.cu; x and dst hold rows·d floats, gain d.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// x += y, then dst = rms_norm(x), in one launch (`add_rms_norm` in cuda/rms_norm.cu).
pub fn add_rms_norm(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    y: &Tensor<Cuda>,
    gain: &Tensor<Cuda>,
    eps: f32,
    dst: &mut Tensor<Cuda>,
) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::add_rms_norm(x, y, gain, dst)?;
    if rows == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::RmsNorm, entry::ADD_RMS_NORM)?;
    let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let d32 = d as u32;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&y.buf.dev).arg(&gain.buf.dev).arg(&mut dst.buf.dev).arg(&d32).arg(&eps);
    // SAFETY: (x, y, gain, dst, d, eps) match add_rms_norm in cuda/rms_norm.cu; x, y and dst hold
    // rows·d floats, gain d.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
