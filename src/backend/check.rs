//! Index checks shared by the GPU backends, made on the host copies of the u32 inputs (which
//! every backend keeps for tensors written with `write_u32`), so bad indices are errors before a
//! kernel could skip or misread them, without waiting for the device. Also the argument rules of
//! `top_k`, which every backend shares.

use crate::backend::{AttnBatch, Backend, DType, MAX_TOP_K, Tensor, expect_shape};
use crate::error::{Error, Result};

/// The k of a `top_k` call, once its shapes, dtypes and range are checked.
pub fn top_k<B: Backend>(x: &Tensor<B>, ids: &Tensor<B>, vals: &Tensor<B>) -> Result<usize> {
    let (k, vocab) = (ids.cols, x.cols);
    expect_shape("top_k", ids, x.rows, k)?;
    expect_shape("top_k", vals, x.rows, k + 1)?;
    let dtypes = [(x, DType::F32, "x"), (ids, DType::U32, "ids"), (vals, DType::F32, "vals")];
    if let Some((t, d, name)) = dtypes.iter().find(|(t, d, _)| t.dtype != *d) {
        return Err(Error::InvalidArgument(format!("top_k: {name} must be {d:?}, got {:?}", t.dtype)));
    }
    if u32::try_from(vocab).is_err() {
        return Err(Error::InvalidArgument(format!("top_k: rows of {vocab} values have no u32 indices")));
    }
    if k == 0 || k > vocab.min(MAX_TOP_K) {
        return Err(Error::InvalidArgument(format!(
            "top_k: k = {k} outside 1..=min(vocab = {vocab}, MAX_TOP_K = {MAX_TOP_K})"
        )));
    }
    Ok(k)
}

/// The block-table view of one attention batch: token t of table row `seq[t]` at `pos[t]`.
struct AttnIndices<'a> {
    seq: &'a [u32],
    pos: &'a [u32],
    table: &'a [u32], // [table_rows, max_blocks]
    table_rows: usize,
    max_blocks: usize,
    block_size: usize,
}

/// Rejects a sequence without a block-table row, a position past its row, or a block outside a
/// cache of `n_slots` slots.
fn attention_indices(ix: &AttnIndices, n_slots: usize) -> Result<()> {
    let (bs, max_blocks) = (ix.block_size.max(1), ix.max_blocks);
    let n_blocks = n_slots / bs;
    let bad = |what: String| Err(Error::InvalidArgument(format!("attention: {what}")));
    for (t, (&s, &p)) in ix.seq.iter().zip(ix.pos).enumerate() {
        let (s, p) = (s as usize, p as usize);
        if s >= ix.table_rows {
            return bad(format!("token {t}: sequence {s} has no block-table row"));
        }
        if p >= max_blocks * bs {
            return bad(format!("token {t}: position {p} beyond {max_blocks} blocks of {bs}"));
        }
        let row = &ix.table[s * max_blocks..s * max_blocks + p / bs + 1];
        if let Some(b) = row.iter().find(|&&b| b as usize >= n_blocks) {
            return bad(format!("token {t}: block {b} outside the cache's {n_blocks}"));
        }
    }
    Ok(())
}

/// Checks an attention batch through `mirror`, which gives a u32 buffer's host copy (None when the
/// device wrote it: then the kernel's own guards are all there is).
pub fn attention_batch<B: Backend>(
    batch: &AttnBatch<B>,
    n_slots: usize,
    mirror: fn(&B::Buffer) -> Option<&[u32]>,
) -> Result<()> {
    let (Some(seq), Some(pos), Some(table)) =
        (mirror(&batch.seq.buf), mirror(&batch.pos.buf), mirror(&batch.block_table.buf))
    else {
        return Ok(());
    };
    let indices = AttnIndices {
        seq,
        pos,
        table,
        table_rows: batch.block_table.rows,
        max_blocks: batch.block_table.cols,
        block_size: batch.block_size,
    };
    attention_indices(&indices, n_slots)
}
