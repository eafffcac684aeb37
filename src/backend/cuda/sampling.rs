//! Sampling on CUDA: `cuda/argmax.cu` and `cuda/top_k.cu`, one 1024-thread block per row.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::Cuda;
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::{Tensor, check};
use crate::error::Result;

/// Threads per block of `cuda/top_k.cu`: its TOP_K_THREADS, which sizes its shared arrays (the
/// kernel does nothing under any other block size).
const TOP_K_THREADS: u32 = 1024;

pub fn argmax(cuda: &Cuda, x: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::argmax(x, dst)?;
    dst.buf.mirror.forget(); // written by the device from here on
    if x.rows == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::Argmax, entry::ARGMAX)?;
    let vocab = x.cols as u32;
    let cfg = LaunchConfig { grid_dim: (x.rows as u32, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&mut dst.buf.dev).arg(&vocab);
    // SAFETY: (x, dst, vocab) match cuda/argmax.cu; x holds rows · vocab floats, dst rows u32.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

pub fn top_k(cuda: &Cuda, x: &Tensor<Cuda>, ids: &mut Tensor<Cuda>, vals: &mut Tensor<Cuda>) -> Result<()> {
    let k = check::top_k(x, ids, vals)?;
    ids.buf.mirror.forget(); // written by the device from here on
    if x.rows == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::TopK, entry::TOP_K)?;
    let (vocab, k) = (x.cols as u32, k as u32);
    let cfg = LaunchConfig { grid_dim: (x.rows as u32, 1, 1), block_dim: (TOP_K_THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&mut ids.buf.dev).arg(&mut vals.buf.dev).arg(&vocab).arg(&k);
    // SAFETY: (x, ids, vals, vocab, k) match cuda/top_k.cu; check::top_k proved x holds rows · vocab
    // floats, ids rows · k u32 and vals rows · (k + 1) floats, with 1 ≤ k ≤ min(vocab, 256).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
