//! Sampling on the device (`shaders/argmax.wgsl`, `shaders/top_k.wgsl`), so decoding reads back
//! token ids, or a row's best candidates, instead of every logit.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn argmax(be: &Wgpu, x: &Tensor<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    check::argmax(x, dst)?;
    dst.buf.mirror.forget(); // written by the device from here on
    let v = Variant::plain(Kernel::Argmax);
    be.ctx.dispatch(v, &[&x.buf, &dst.buf], &[x.cols as u32], [x.rows as u32, 1, 1])
}

pub fn top_k(be: &Wgpu, x: &Tensor<Wgpu>, ids: &mut Tensor<Wgpu>, vals: &mut Tensor<Wgpu>) -> Result<()> {
    let k = check::top_k(x, ids, vals)?;
    ids.buf.mirror.forget(); // written by the device from here on
    let v = Variant::plain(Kernel::TopK);
    be.ctx.dispatch(v, &[&x.buf, &ids.buf, &vals.buf], &[x.cols as u32, k as u32], [x.rows as u32, 1, 1])
}
