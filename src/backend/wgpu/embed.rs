//! Embedding lookup for every weight format (`shaders/embed.wgsl`, with the matmul decoders).

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, Weight, check};
use crate::error::Result;

/// One dispatch per part of the table (`GpuWeight::parts`): a part writes the rows of dst whose
/// ids fall in its row range, and the last part also those past the table (zeros).
pub fn embed(be: &Wgpu, table: &Weight<Wgpu>, ids: &Tensor<Wgpu>, scale: f32, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let n_tokens = ids.rows;
    check::embed(table, ids, dst)?;
    let v = Variant { format: Some(table.format), ..Variant::plain(Kernel::Embed) };
    let groups = table.cols.div_ceil(8).div_ceil(256) as u32;
    let parts = &table.storage.parts;
    for (i, part) in parts.iter().enumerate() {
        // ids in [row0, end) are this part's.
        let end = if i + 1 == parts.len() { u32::MAX } else { (part.row0 + part.rows) as u32 };
        let rows = [part.rows as u32, n_tokens as u32, scale.to_bits(), part.row0 as u32, end];
        let params = [&part.info[..], &rows].concat();
        be.ctx.dispatch(v, &[&part.buf, &ids.buf, &dst.buf], &params, [groups, n_tokens as u32, 1])?;
    }
    Ok(())
}
