//! Greedy sampling on the device (`shaders/argmax.wgsl`), so decoding reads back token ids only.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{DType, Tensor, expect_shape};
use crate::error::Result;

pub fn argmax(be: &Wgpu, x: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    expect_shape("argmax", dst, x.rows, 1)?;
    be.expect_dtypes("argmax", &[(x, DType::F32), (dst, DType::U32)])?;
    dst.buf.mirror = None;
    let v = Variant::plain(Kernel::Argmax);
    be.ctx.dispatch(v, &[&x.buf, &dst.buf], &[x.cols as u32], [x.rows as u32, 1, 1])
}
