//! RMSNorm (`shaders/rms_norm.wgsl`): one workgroup per row.

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
