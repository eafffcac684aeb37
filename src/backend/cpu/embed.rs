//! Token embedding on the CPU: each row of the table is dequantized straight into dst, then scaled.

use crate::backend::{Tensor, Weight, check};
use crate::error::Result;
use crate::quant::dequantize_row;

use super::Cpu;
use super::buffer::{f32s_mut, index, u32s, weight_storage};

/// See [`crate::Backend::embed`] (dst = scale · row).   table: [vocab, d] any format; ids: u32 [n_tokens, 1]; dst: [n_tokens, d]
pub fn embed(table: &Weight<Cpu>, ids: &Tensor<Cpu>, scale: f32, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "embed";
    let storage = weight_storage(op, table)?;
    check::embed(table, ids, dst)?;
    let (vocab, d) = (table.rows, table.cols);
    let (ids, dst) = (u32s(op, ids)?, f32s_mut(op, dst)?);
    if d == 0 {
        return Ok(());
    }
    for (dst_row, &id) in dst.chunks_exact_mut(d).zip(ids) {
        let id = index(op, "token id", id, vocab)?;
        dequantize_row(table.format, storage.row(id), dst_row);
        if scale != 1.0 {
            dst_row.iter_mut().for_each(|v| *v *= scale);
        }
    }
    Ok(())
}
