//! Token embedding on CUDA: `cuda/embed.cu` joined after the table's format decoder.

use cudarc::driver::PushKernelArg;

use super::context::{Cuda, driver, grid_1d};
use super::source::Module;
use crate::backend::{DType, Tensor, Weight, expect_shape};
use crate::error::{Error, Result};

pub fn embed(cuda: &Cuda, table: &Weight<Cuda>, ids: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    if ids.dtype != DType::U32 || ids.cols != 1 {
        return Err(Error::InvalidArgument("embed: ids must be u32 [n_tokens, 1]".into()));
    }
    expect_shape("embed", dst, ids.rows, table.cols)?;
    let (n, d, vocab) = (dst.len() as u64, table.cols as u32, table.rows as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::Embed(table.format), "embed")?;
    let w = &table.storage;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&w.qs).arg(&w.qh).arg(&w.dm).arg(&ids.buf).arg(&mut dst.buf).arg(&n).arg(&d).arg(&vocab);
    // SAFETY: arguments match cuda/embed.cu; the weight arrays hold vocab · d values of its format,
    // ids n / d u32, dst n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}
