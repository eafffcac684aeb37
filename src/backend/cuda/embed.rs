//! Token embedding on CUDA: `cuda/embed.cu` joined after the table's format decoder.

use cudarc::driver::PushKernelArg;

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::{Tensor, Weight, check};
use crate::error::Result;

pub fn embed(cuda: &Cuda, table: &Weight<Cuda>, ids: &Tensor<Cuda>, scale: f32, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::embed(table, ids, dst)?;
    let (n, d, vocab) = (dst.len() as u64, table.cols as u32, table.rows as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::Embed(table.format), entry::EMBED)?;
    let w = &table.storage;
    let mut l = cuda.stream.launch_builder(&f);
    let [qs, qh, dm] = w.qs_qh_dm();
    l.arg(qs).arg(qh).arg(dm).arg(&ids.buf.dev).arg(&mut dst.buf.dev).arg(&n).arg(&d).arg(&vocab).arg(&scale);
    // SAFETY: arguments match cuda/embed.cu; the weight arrays hold vocab · d values of its format,
    // ids n / d u32, dst n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}
