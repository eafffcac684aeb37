//! Elementwise ops on CUDA: `cuda/{silu_mul,gelu_mul,add_assign,add_bias,gather_rows}.cu`, one thread per element.

use cudarc::driver::PushKernelArg;

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry};
use super::planes::Planes;
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn silu_mul(cuda: &Cuda, gate: &Tensor<Cuda>, up: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::silu_mul(gate, up, dst)?;
    let n = gate.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::SiluMul, entry::SILU_MUL)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&gate.buf.dev).arg(&up.buf.dev).arg(&mut dst.buf.dev).arg(&n);
    // SAFETY: (gate, up, dst, n) match cuda/silu_mul.cu; all three hold n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

/// silu_mul that also writes dst's two int8 planes into `planes` (for the GEMV of
/// `silu_mul_matmul`); the caller checked the arguments and that d_ff is whole 32-value blocks.
pub(super) fn silu_mul_q8(
    cuda: &Cuda,
    gate: &Tensor<Cuda>,
    up: &Tensor<Cuda>,
    dst: &mut Tensor<Cuda>,
    planes: &mut Planes,
) -> Result<()> {
    let n = gate.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let (mut xq, mut xds) = planes.views();
    let f = cuda.function(Module::SiluMul, entry::SILU_MUL_Q8)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&gate.buf.dev).arg(&up.buf.dev).arg(&mut dst.buf.dev).arg(&n).arg(&mut xq).arg(&mut xds);
    // SAFETY: arguments match silu_mul_q8 in cuda/silu_mul.cu; gate, up, dst hold n floats (a
    // multiple of 32), xq 2·n bytes and xds 2·n/32 float2 (Planes::hold sized them).
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn gelu_mul(cuda: &Cuda, gate: &Tensor<Cuda>, up: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::gelu_mul(gate, up, dst)?;
    let n = gate.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::GeluMul, entry::GELU_MUL)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&gate.buf.dev).arg(&up.buf.dev).arg(&mut dst.buf.dev).arg(&n);
    // SAFETY: (gate, up, dst, n) match cuda/gelu_mul.cu; all three hold n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn add_assign(cuda: &Cuda, x: &mut Tensor<Cuda>, y: &Tensor<Cuda>) -> Result<()> {
    check::add_assign(x, y)?;
    let n = x.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::AddAssign, entry::ADD_ASSIGN)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&y.buf.dev).arg(&n);
    // SAFETY: (x, y, n) match cuda/add_assign.cu; both hold n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn add_bias(cuda: &Cuda, x: &mut Tensor<Cuda>, bias: &Tensor<Cuda>) -> Result<()> {
    check::add_bias(x, bias)?;
    let (n, cols) = (x.len() as u64, x.cols as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::AddBias, entry::ADD_BIAS)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&bias.buf.dev).arg(&n).arg(&cols);
    // SAFETY: (x, bias, n, cols) match cuda/add_bias.cu; x holds n floats, bias cols.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn gather_rows(cuda: &Cuda, x: &Tensor<Cuda>, rows: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    check::gather_rows(x, rows, dst)?;
    let (n, cols, n_x) = (dst.len() as u64, x.cols as u32, x.rows as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::GatherRows, entry::GATHER_ROWS)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&rows.buf.dev).arg(&mut dst.buf.dev).arg(&n).arg(&cols).arg(&n_x);
    // SAFETY: arguments match cuda/gather_rows.cu; dst holds n floats, rows n / cols u32, x n_x · cols.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}
