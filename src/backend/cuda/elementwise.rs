//! Elementwise ops on CUDA: `cuda/{silu_mul,add_assign,add_bias,gather_rows}.cu`, one thread per element.

use cudarc::driver::{DevicePtr, PushKernelArg};

use super::context::{Cuda, driver, expect_below, grid_1d};
use super::matmul::{VEC_MAX_M, q8_layout};
use super::source::Module;
use crate::backend::{DType, Tensor, expect_shape};
use crate::error::{Error, Result};

pub fn silu_mul(cuda: &Cuda, gate: &Tensor<Cuda>, up: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    expect_shape("silu_mul", up, gate.rows, gate.cols)?;
    expect_shape("silu_mul", dst, gate.rows, gate.cols)?;
    let n = gate.len() as u64;
    if n == 0 {
        return Ok(());
    }
    if gate.rows > VEC_MAX_M || !gate.cols.is_multiple_of(32) {
        let f = cuda.function(Module::SiluMul, "silu_mul")?;
        let mut l = cuda.stream.launch_builder(&f);
        l.arg(&gate.buf.dev).arg(&up.buf.dev).arg(&mut dst.buf.dev).arg(&n);
        // SAFETY: (gate, up, dst, n) match cuda/silu_mul.cu; all three hold n floats.
        unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
        return Ok(());
    }
    // Decode-sized rows: also leave dst's int8 planes for the down projection's GEMV.
    let (xds_at, bytes) = q8_layout(dst.len());
    let mut guard = cuda.scratch(&cuda.q8_scratch, bytes)?;
    let (mut xq, mut xds) = guard.as_mut().expect("scratch allocated").split_at_mut(xds_at);
    let f = cuda.function(Module::SiluMul, "silu_mul_q8")?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&gate.buf.dev).arg(&up.buf.dev).arg(&mut dst.buf.dev).arg(&n).arg(&mut xq).arg(&mut xds);
    // SAFETY: arguments match silu_mul_q8 in cuda/silu_mul.cu; gate, up, dst hold n floats (a
    // multiple of 32), xq 2·n bytes and xds 2·n/32 float2 (q8_layout).
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    cuda.q8_quantized((dst.buf.dev.device_ptr(&cuda.stream).0, dst.len()));
    Ok(())
}

pub fn add_assign(cuda: &Cuda, x: &mut Tensor<Cuda>, y: &Tensor<Cuda>) -> Result<()> {
    expect_shape("add_assign", y, x.rows, x.cols)?;
    let n = x.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::AddAssign, "add_assign")?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&y.buf.dev).arg(&n);
    // SAFETY: (x, y, n) match cuda/add_assign.cu; both hold n floats.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn add_bias(cuda: &Cuda, x: &mut Tensor<Cuda>, bias: &Tensor<Cuda>) -> Result<()> {
    expect_shape("add_bias", bias, 1, x.cols)?;
    let (n, cols) = (x.len() as u64, x.cols as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::AddBias, "add_bias")?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&bias.buf.dev).arg(&n).arg(&cols);
    // SAFETY: (x, bias, n, cols) match cuda/add_bias.cu; x holds n floats, bias cols.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

pub fn gather_rows(cuda: &Cuda, x: &Tensor<Cuda>, rows: &Tensor<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    expect_shape("gather_rows", dst, rows.rows, x.cols)?;
    if rows.dtype != DType::U32 || rows.cols != 1 {
        return Err(Error::InvalidArgument("gather_rows: rows must be u32 [n, 1]".into()));
    }
    expect_below("gather_rows", "row", rows, x.rows)?;
    let (n, cols, n_x) = (dst.len() as u64, x.cols as u32, x.rows as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::GatherRows, "gather_rows")?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&x.buf.dev).arg(&rows.buf.dev).arg(&mut dst.buf.dev).arg(&n).arg(&cols).arg(&n_x);
    // SAFETY: arguments match cuda/gather_rows.cu; dst holds n floats, rows n / cols u32, x n_x · cols.
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}
