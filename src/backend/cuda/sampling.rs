//! Sampling on CUDA: `cuda/argmax.cu`, one 1024-thread block per row.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::{Cuda, driver};
use super::source::Module;
use crate::backend::{DType, Tensor, expect_shape};
use crate::error::{Error, Result};

pub fn argmax(cuda: &Cuda, x: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    expect_shape("argmax", dst, x.rows, 1)?;
    if dst.dtype != DType::U32 {
        return Err(Error::InvalidArgument("argmax: dst must be u32".into()));
    }
    if x.rows == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::Argmax, "argmax")?;
    let vocab = x.cols as u32;
    let cfg = LaunchConfig { grid_dim: (x.rows as u32, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf).arg(&mut dst.buf).arg(&vocab);
    // SAFETY: (x, dst, vocab) match cuda/argmax.cu; x holds rows · vocab floats, dst rows u32.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
