//! Embedding lookup for every weight format (`shaders/embed.wgsl`, with the matmul decoders).

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, Weight, check};
use crate::error::Result;

pub fn embed(be: &Wgpu, table: &Weight<Wgpu>, ids: &Tensor<Wgpu>, scale: f32, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let n_tokens = ids.rows;
    check::embed(table, ids, dst)?;
    let params = [&table.storage.info[..], &[table.rows as u32, n_tokens as u32, scale.to_bits()]].concat();
    let v = Variant { format: Some(table.format), ..Variant::plain(Kernel::Embed) };
    let groups = table.cols.div_ceil(8).div_ceil(256) as u32;
    be.ctx.dispatch(v, &[&table.storage.buf, &ids.buf, &dst.buf], &params, [groups, n_tokens as u32, 1])
}
