//! RMSNorm (`shaders/rms_norm.wgsl`): one workgroup per row.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{DType, Tensor, expect_shape};
use crate::error::Result;

pub fn rms_norm(be: &Wgpu, x: &Tensor<Wgpu>, gain: &Tensor<Wgpu>, eps: f32, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    expect_shape("rms_norm", gain, 1, d)?;
    expect_shape("rms_norm", dst, rows, d)?;
    be.expect_dtypes("rms_norm", &[(x, DType::F32), (gain, DType::F32), (dst, DType::F32)])?;
    let v = Variant::plain(Kernel::RmsNorm);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &dst.buf], &[d as u32, eps.to_bits()], [rows as u32, 1, 1])
}
