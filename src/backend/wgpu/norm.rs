//! RMSNorm (`shaders/rms_norm.wgsl`), alone or after the residual add (`shaders/add_rms_norm.wgsl`,
//! one dispatch for both): one workgroup per row.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn rms_norm(be: &Wgpu, x: &Tensor<Wgpu>, gain: &Tensor<Wgpu>, eps: f32, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::rms_norm(x, gain, dst)?;
    let v = Variant::plain(Kernel::RmsNorm);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &dst.buf], &[d as u32, eps.to_bits()], [rows as u32, 1, 1])
}

/// x += y, then dst = rms_norm(x): add_assign's then rms_norm's bits, one dispatch.
pub fn add_rms_norm(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    y: &Tensor<Wgpu>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::add_rms_norm(x, y, gain, dst)?;
    let v = Variant::plain(Kernel::AddRmsNorm);
    be.ctx.dispatch(v, &[&x.buf, &y.buf, &gain.buf, &dst.buf], &[d as u32, eps.to_bits()], [rows as u32, 1, 1])
}
