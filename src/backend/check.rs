//! Index checks shared by the GPU backends, made on the host copies of the u32 inputs (which
//! every backend keeps for tensors written with `write_u32`), so bad indices are errors before a
//! kernel could skip or misread them, without waiting for the device.

use crate::error::{Error, Result};

/// The block-table view of one attention batch: token t of table row `seq[t]` at `pos[t]`.
pub struct AttnIndices<'a> {
    pub seq: &'a [u32],
    pub pos: &'a [u32],
    pub table: &'a [u32], // [table_rows, max_blocks]
    pub table_rows: usize,
    pub max_blocks: usize,
    pub block_size: usize,
}

/// Rejects a sequence without a block-table row, a position past its row, or a block outside a
/// cache of `n_slots` slots.
pub fn attention_indices(ix: &AttnIndices, n_slots: usize) -> Result<()> {
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
