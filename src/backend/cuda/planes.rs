//! Activations quantized for the decode GEMV (`cuda/quantize_q8_1.cu`): two int8 planes of x and
//! their per-block scales in the q8 scratch, held (`Planes`) from the launch that writes them to
//! the GEMV that reads them. Which op writes them is explicit at the call site: `matmuls` calls
//! `quantize_x` once for all its weights, `silu_mul_matmul` lets `silu_mul_q8` write them.

use std::sync::MutexGuard;

use cudarc::driver::{CudaSlice, CudaViewMut, DevicePtr, PushKernelArg};

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::Tensor;
use crate::error::Result;

/// Values per block of the activation planes (`cuda/quantize_q8_1.cu`).
pub(super) const Q8_BLOCK: usize = 32;

/// The q8 scratch, held while its planes are written and read: two int8 planes [2][m][k], then
/// (d, d·Σq) pairs [2][m][k/32], 16-byte aligned (`q8_layout`).
pub(super) struct Planes<'a> {
    guard: MutexGuard<'a, Option<CudaSlice<u8>>>,
    xds_at: usize,
}

impl<'a> Planes<'a> {
    pub(super) fn hold(cuda: &'a Cuda, total: usize) -> Result<Planes<'a>> {
        let (xds_at, bytes) = q8_layout(total);
        Ok(Planes { guard: cuda.scratch(&cuda.q8_scratch, bytes)?, xds_at })
    }

    /// (xq, xds): the planes and their scales, as views a kernel writes.
    pub(super) fn views(&mut self) -> (CudaViewMut<'_, u8>, CudaViewMut<'_, u8>) {
        self.guard.as_mut().expect("scratch allocated").split_at_mut(self.xds_at)
    }

    /// The device addresses of (xq, xds), for the GEMV that reads them.
    pub(super) fn pointers(&mut self, cuda: &Cuda) -> (u64, u64) {
        let (xq, xds) = self.views();
        (xq.device_ptr(&cuda.stream).0, xds.device_ptr(&cuda.stream).0)
    }
}

/// Quantizes x [m, k] into two int8 planes (`cuda/quantize_q8_1.cu`), held until the caller's GEMVs
/// are queued.
pub(super) fn quantize_x<'a>(cuda: &'a Cuda, x: &Tensor<Cuda>) -> Result<Planes<'a>> {
    let total = x.len() as u64;
    let mut planes = Planes::hold(cuda, x.len())?;
    let q = cuda.function(Module::QuantizeQ8_1, entry::QUANTIZE_Q8_1)?;
    {
        let (mut xq, mut xds) = planes.views();
        let mut l = cuda.stream.launch_builder(&q);
        l.arg(&x.buf.dev).arg(&mut xq).arg(&mut xds).arg(&total);
        // SAFETY: arguments match cuda/quantize_q8_1.cu; x holds total floats, xq 2 · total bytes,
        // xds 2 · total / 32 float2 (k is a multiple of 32 for quantized formats).
        unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    }
    Ok(planes)
}

/// Where the q8 scratch puts the scales of `total` quantized values, and its size: the two int8
/// planes (2 · total bytes), then 16-byte aligned (d, d·Σq) float2 pairs for each plane's blocks.
pub(super) fn q8_layout(total: usize) -> (usize, usize) {
    let xds_at = (2 * total).next_multiple_of(16);
    (xds_at, xds_at + 2 * (total / Q8_BLOCK) * 8)
}
