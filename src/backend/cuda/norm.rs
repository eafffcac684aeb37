//! Normalization on CUDA: `cuda/rms_norm.cu`, one block per row. The `_q8` entries also write the
//! normed rows' int8 planes for the decode GEMV that reads them next (`planes.rs`).

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::Cuda;
use super::driver::driver;
use super::kernels::{Module, entry};
use super::planes::{Planes, Q8_BLOCK};
use crate::backend::{Tensor, check};
use crate::error::Result;

/// Widest row whose norm also writes its int8 planes: the row is staged in shared memory (32 KiB,
/// under the 48 KiB a launch gets without opting in).
pub(super) const NORM_Q8_MAX_COLS: usize = 8192;

pub fn rms_norm(cuda: &Cuda, x: &Tensor<Cuda>, gain: &Tensor<Cuda>, eps: f32, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::rms_norm(x, gain, dst)?;
    launch(cuda, Residual::None(x), gain, eps, dst, None)
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
    check::add_rms_norm(x, y, gain, dst)?;
    launch(cuda, Residual::Add(x, y), gain, eps, dst, None)
}

/// [x += y, then] dst = rms_norm(x), and dst's int8 planes in the same launch, held until the
/// caller's GEMVs are queued; x.cols must be a multiple of 32 and at most `NORM_Q8_MAX_COLS` (the
/// row is staged in shared memory).
pub(super) fn norm_q8<'a>(
    cuda: &'a Cuda,
    x: &mut Tensor<Cuda>,
    y: Option<&Tensor<Cuda>>,
    gain: &Tensor<Cuda>,
    eps: f32,
    dst: &mut Tensor<Cuda>,
) -> Result<Planes<'a>> {
    assert!(
        x.cols.is_multiple_of(Q8_BLOCK) && x.cols <= NORM_Q8_MAX_COLS,
        "norm_q8: rows of {} values are not whole blocks or do not fit shared memory",
        x.cols
    );
    check::norm(x, y, gain, dst)?;
    let residual = match y {
        Some(y) => Residual::Add(x, y),
        None => Residual::None(x),
    };
    let mut planes = Planes::hold(cuda, dst.len())?;
    launch(cuda, residual, gain, eps, dst, Some(&mut planes))?;
    Ok(planes)
}

/// The norm's input: x alone, or x and the y added to it in place.
enum Residual<'t> {
    None(&'t Tensor<Cuda>),
    Add(&'t mut Tensor<Cuda>, &'t Tensor<Cuda>),
}

/// One launch of the entry for (residual, planes), shapes already checked.
fn launch(
    cuda: &Cuda,
    residual: Residual,
    gain: &Tensor<Cuda>,
    eps: f32,
    dst: &mut Tensor<Cuda>,
    planes: Option<&mut Planes>,
) -> Result<()> {
    let (rows, d) = (dst.rows, dst.cols);
    if rows == 0 {
        return Ok(());
    }
    let name = match (&residual, planes.is_some()) {
        (Residual::None(_), false) => entry::RMS_NORM,
        (Residual::Add(..), false) => entry::ADD_RMS_NORM,
        (Residual::None(_), true) => entry::RMS_NORM_Q8,
        (Residual::Add(..), true) => entry::ADD_RMS_NORM_Q8,
    };
    let f = cuda.function(Module::RmsNorm, name)?;
    // The _q8 entries stage the normed row in shared memory (d floats) for quantize_row_q8.
    let staged = if planes.is_some() { (d * 4) as u32 } else { 0 };
    let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: staged };
    let (d32, total) = (d as u32, (rows * d) as u64);
    let mut l = cuda.stream.launch_builder(&f);
    match residual {
        Residual::None(x) => l.arg(&x.buf.dev),
        Residual::Add(x, y) => l.arg(&mut x.buf.dev).arg(&y.buf.dev),
    };
    l.arg(&gain.buf.dev).arg(&mut dst.buf.dev).arg(&d32).arg(&eps);
    let mut views = planes.map(|p| p.views());
    if let Some((xq, xds)) = &mut views {
        l.arg(xq).arg(xds).arg(&total);
    }
    // SAFETY: the arguments match the entry's in cuda/rms_norm.cu ([x, y,] gain, dst, d, eps[, xq, xds,
    // total]); x, y and dst hold rows · d floats, gain d (checked by the callers); the planes were held
    // for dst.len() = total values (`norm_q8`), and d is a multiple of 32 there, with d floats of shared
    // memory (`staged`).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
