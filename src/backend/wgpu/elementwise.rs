//! Elementwise ops: SwiGLU, residual add, bias add, row gather (one thread per element).

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{DType, Tensor, expect_shape};
use crate::error::Result;

pub fn silu_mul(be: &Wgpu, gate: &Tensor<Wgpu>, up: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    expect_shape("silu_mul", up, gate.rows, gate.cols)?;
    expect_shape("silu_mul", dst, gate.rows, gate.cols)?;
    be.expect_dtypes("silu_mul", &[(gate, DType::F32), (up, DType::F32), (dst, DType::F32)])?;
    let n = gate.len();
    be.ctx.dispatch(Variant::plain(Kernel::SiluMul), &[&gate.buf, &up.buf, &dst.buf], &[n as u32], be.ctx.grid_1d(n))
}

pub fn add_assign(be: &Wgpu, x: &mut Tensor<Wgpu>, y: &Tensor<Wgpu>) -> Result<()> {
    expect_shape("add_assign", y, x.rows, x.cols)?;
    be.expect_dtypes("add_assign", &[(x, DType::F32), (y, DType::F32)])?;
    let n = x.len();
    be.ctx.dispatch(Variant::plain(Kernel::AddAssign), &[&x.buf, &y.buf], &[n as u32], be.ctx.grid_1d(n))
}

pub fn add_bias(be: &Wgpu, x: &mut Tensor<Wgpu>, bias: &Tensor<Wgpu>) -> Result<()> {
    expect_shape("add_bias", bias, 1, x.cols)?;
    be.expect_dtypes("add_bias", &[(x, DType::F32), (bias, DType::F32)])?;
    let n = x.len();
    let params = [n as u32, x.cols as u32];
    be.ctx.dispatch(Variant::plain(Kernel::AddBias), &[&x.buf, &bias.buf], &params, be.ctx.grid_1d(n))
}

pub fn gather_rows(be: &Wgpu, x: &Tensor<Wgpu>, rows: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    expect_shape("gather_rows", rows, dst.rows, 1)?;
    expect_shape("gather_rows", dst, rows.rows, x.cols)?;
    be.expect_dtypes("gather_rows", &[(x, DType::F32), (rows, DType::U32), (dst, DType::F32)])?;
    be.expect_below("gather_rows", "row", rows, x.rows)?;
    let n = dst.len();
    let params = [n as u32, x.cols as u32, x.rows as u32];
    let v = Variant::plain(Kernel::GatherRows);
    be.ctx.dispatch(v, &[&x.buf, &rows.buf, &dst.buf], &params, be.ctx.grid_1d(n))
}
