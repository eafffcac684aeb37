//! Elementwise ops: SwiGLU, GeGLU, residual add, bias add, row gather (one thread per element).

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn silu_mul(be: &Wgpu, gate: &Tensor<Wgpu>, up: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    check::silu_mul(gate, up, dst)?;
    let n = gate.len();
    be.ctx.dispatch(Variant::plain(Kernel::SiluMul), &[&gate.buf, &up.buf, &dst.buf], &[n as u32], be.ctx.grid_1d(n))
}

pub fn gelu_mul(be: &Wgpu, gate: &Tensor<Wgpu>, up: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    check::gelu_mul(gate, up, dst)?;
    let n = gate.len();
    be.ctx.dispatch(Variant::plain(Kernel::GeluMul), &[&gate.buf, &up.buf, &dst.buf], &[n as u32], be.ctx.grid_1d(n))
}

pub fn add_assign(be: &Wgpu, x: &mut Tensor<Wgpu>, y: &Tensor<Wgpu>) -> Result<()> {
    check::add_assign(x, y)?;
    let n = x.len();
    be.ctx.dispatch(Variant::plain(Kernel::AddAssign), &[&x.buf, &y.buf], &[n as u32], be.ctx.grid_1d(n))
}

pub fn add_bias(be: &Wgpu, x: &mut Tensor<Wgpu>, bias: &Tensor<Wgpu>) -> Result<()> {
    check::add_bias(x, bias)?;
    let n = x.len();
    let params = [n as u32, x.cols as u32];
    be.ctx.dispatch(Variant::plain(Kernel::AddBias), &[&x.buf, &bias.buf], &params, be.ctx.grid_1d(n))
}

pub fn gather_rows(be: &Wgpu, x: &Tensor<Wgpu>, rows: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    check::gather_rows(x, rows, dst)?;
    let n = dst.len();
    let params = [n as u32, x.cols as u32, x.rows as u32];
    let v = Variant::plain(Kernel::GatherRows);
    be.ctx.dispatch(v, &[&x.buf, &rows.buf, &dst.buf], &params, be.ctx.grid_1d(n))
}
