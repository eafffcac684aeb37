//! Normalization on CUDA: `cuda/rms_norm.cu`, one block per row. Decode-sized calls (≤ 8 rows)
//! also quantize dst for the GEMVs that follow (see `matmul::with_q8_1`), saving their launch.

use cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};

use super::context::{Cuda, driver};
use super::matmul::{VEC_MAX_M, q8_layout};
use super::source::Module;
use crate::backend::{Tensor, expect_shape};
use crate::error::Result;

pub fn rms_norm(cuda: &Cuda, x: &Tensor<Cuda>, gain: &Tensor<Cuda>, eps: f32, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    expect_shape("rms_norm", gain, 1, d)?;
    expect_shape("rms_norm", dst, rows, d)?;
    if rows == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let d32 = d as u32;
    if rows > VEC_MAX_M || !d.is_multiple_of(32) {
        let f = cuda.function(Module::RmsNorm, "rms_norm")?;
        let mut l = cuda.stream.launch_builder(&f);
        l.arg(&x.buf.dev).arg(&gain.buf.dev).arg(&mut dst.buf.dev).arg(&d32).arg(&eps);
        // SAFETY: (x, gain, dst, d, eps) match cuda/rms_norm.cu; x and dst hold rows·d floats, gain d.
        unsafe { l.launch(cfg) }.map_err(driver)?;
        return Ok(());
    }
    // Decode-sized rows: also leave dst's int8 planes for the GEMVs that read it next.
    let total = dst.len() as u64;
    let (xds_at, bytes) = q8_layout(dst.len());
    let mut guard = cuda.scratch(&cuda.q8_scratch, bytes)?;
    let (mut xq, mut xds) = guard.as_mut().expect("scratch allocated").split_at_mut(xds_at);
    let f = cuda.function(Module::RmsNorm, "rms_norm_q8")?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&gain.buf.dev).arg(&mut dst.buf.dev).arg(&d32).arg(&eps);
    l.arg(&mut xq).arg(&mut xds).arg(&total);
    // SAFETY: arguments match rms_norm_q8 in cuda/rms_norm.cu; x and dst hold rows·d floats, gain d,
    // xq 2·total bytes and xds 2·total/32 float2 (q8_layout); d is a multiple of 32.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    cuda.q8_quantized((dst.buf.dev.device_ptr(&cuda.stream).0, dst.len()));
    Ok(())
}
