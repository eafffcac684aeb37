//! The KV cache: a pool of fixed-size blocks of K and V slots for every layer, and a block table
//! per sequence. The plain cache is the special case of one block per sequence, `block_size` =
//! the context length (one contiguous region each); the paged cache uses small blocks allocated on
//! demand. Both go through the same block table, so the attention kernels see one layout.

use crate::backend::{Backend, DType, KvLayer};
use crate::error::{Error, Result};
use crate::model::Config;

/// How the pool is cut into blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLayout {
    /// Tokens per block.
    pub block_size: usize,
    /// Blocks in the pool.
    pub n_blocks: usize,
}

impl CacheLayout {
    /// One contiguous region of `context` slots for each of `max_seqs` sequences.
    pub fn plain(max_seqs: usize, context: usize) -> CacheLayout {
        CacheLayout { block_size: context, n_blocks: max_seqs }
    }

    /// `n_pages` pages of `page_size` slots, shared by all sequences.
    pub fn paged(page_size: usize, n_pages: usize) -> CacheLayout {
        CacheLayout { block_size: page_size, n_blocks: n_pages }
    }

    pub fn n_slots(&self) -> usize {
        self.block_size * self.n_blocks
    }
}

/// Identifies one sequence's cache.
pub type SeqId = usize;

/// Block accounting (reported by `--json` outputs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub allocated: u64,
    pub freed: u64,
    /// Allocations served by a block that had been used and freed before.
    pub reused: u64,
}

/// Free list over block ids; remembers which blocks were ever used, to count reuse.
struct BlockPool {
    free: Vec<u32>,
    ever_used: Vec<bool>,
    stats: PoolStats,
}

impl BlockPool {
    fn new(n_blocks: usize) -> BlockPool {
        // Reversed so blocks are handed out in increasing order (contiguous for plain caches).
        BlockPool { free: (0..n_blocks as u32).rev().collect(), ever_used: vec![false; n_blocks], stats: PoolStats::default() }
    }

    fn alloc(&mut self) -> Option<u32> {
        let block = self.free.pop()?;
        self.stats.allocated += 1;
        if std::mem::replace(&mut self.ever_used[block as usize], true) {
            self.stats.reused += 1;
        }
        Some(block)
    }

    fn release(&mut self, block: u32) {
        self.stats.freed += 1;
        self.free.push(block);
    }
}

/// One sequence: its blocks in position order and how many positions are filled.
#[derive(Default)]
struct SeqBlocks {
    blocks: Vec<u32>,
    len: usize,
}

pub struct KvCache<B: Backend> {
    pub layers: Vec<KvLayer<B>>, // per layer: k, v [n_slots, kv_dim]
    pub layout: CacheLayout,
    pool: BlockPool,
    seqs: Vec<Option<SeqBlocks>>,
}

impl<B: Backend> KvCache<B> {
    pub fn new(backend: &B, config: &Config, layout: CacheLayout) -> Result<KvCache<B>> {
        if layout.block_size == 0 || layout.n_blocks == 0 {
            return Err(Error::InvalidArgument(format!("KV cache layout {layout:?} is empty")));
        }
        let n_slots = layout.n_slots();
        let layers = (0..config.n_layers)
            .map(|_| {
                Ok(KvLayer {
                    k: backend.alloc(DType::F32, n_slots, config.kv_dim())?,
                    v: backend.alloc(DType::F32, n_slots, config.kv_dim())?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, layout, pool: BlockPool::new(layout.n_blocks), seqs: Vec::new() })
    }

    /// Starts an empty sequence.
    pub fn add_seq(&mut self) -> SeqId {
        match self.seqs.iter().position(Option::is_none) {
            Some(id) => {
                self.seqs[id] = Some(SeqBlocks::default());
                id
            }
            None => {
                self.seqs.push(Some(SeqBlocks::default()));
                self.seqs.len() - 1
            }
        }
    }

    fn seq(&self, id: SeqId) -> Result<&SeqBlocks> {
        self.seqs.get(id).and_then(Option::as_ref).ok_or_else(|| Error::Cache(format!("no sequence {id}")))
    }

    fn seq_mut(&mut self, id: SeqId) -> Result<&mut SeqBlocks> {
        self.seqs.get_mut(id).and_then(Option::as_mut).ok_or_else(|| Error::Cache(format!("no sequence {id}")))
    }

    /// Positions filled in this sequence.
    pub fn seq_len(&self, id: SeqId) -> Result<usize> {
        Ok(self.seq(id)?.len)
    }

    /// The longest sequence a block table can describe.
    pub fn max_seq_len(&self) -> usize {
        self.layout.n_slots()
    }

    /// Blocks a sequence would need to hold `len` positions.
    pub fn blocks_for(&self, len: usize) -> usize {
        len.div_ceil(self.layout.block_size)
    }

    pub fn free_blocks(&self) -> usize {
        self.pool.free.len()
    }

    /// Grows a sequence to `new_len` positions, allocating blocks as needed. On failure nothing
    /// changes: the caller may preempt another sequence and retry.
    pub fn grow(&mut self, id: SeqId, new_len: usize) -> Result<()> {
        let need = self.blocks_for(new_len);
        let have = self.seq(id)?.blocks.len();
        if need > have && need - have > self.pool.free.len() {
            return Err(Error::Cache(format!(
                "out of KV blocks: sequence {id} needs {} more for {new_len} positions, {} free",
                need - have,
                self.pool.free.len()
            )));
        }
        for _ in have..need {
            let block = self.pool.alloc().expect("free count checked above");
            self.seq_mut(id)?.blocks.push(block);
        }
        let seq = self.seq_mut(id)?;
        seq.len = seq.len.max(new_len);
        Ok(())
    }

    /// Cuts a sequence back to `len` positions (speculative rollback), releasing whole blocks.
    pub fn truncate(&mut self, id: SeqId, len: usize) -> Result<()> {
        let keep = self.blocks_for(len);
        let seq = self.seq_mut(id)?;
        let dropped: Vec<u32> = seq.blocks.drain(keep.min(seq.blocks.len())..).collect();
        seq.len = seq.len.min(len);
        dropped.into_iter().for_each(|b| self.pool.release(b));
        Ok(())
    }

    /// Ends a sequence and returns its blocks to the pool.
    pub fn remove_seq(&mut self, id: SeqId) -> Result<()> {
        self.truncate(id, 0)?;
        self.seqs[id] = None;
        Ok(())
    }

    /// The slot holding position `pos` of a sequence.
    pub fn slot(&self, id: SeqId, pos: usize) -> Result<u32> {
        let seq = self.seq(id)?;
        let block = seq.blocks.get(pos / self.layout.block_size).ok_or_else(|| {
            Error::Cache(format!("position {pos} of sequence {id} is beyond its {} positions", seq.len))
        })?;
        Ok(*block * self.layout.block_size as u32 + (pos % self.layout.block_size) as u32)
    }

    /// The sequence's block ids in position order.
    pub fn blocks(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.blocks)
    }

    pub fn stats(&self) -> PoolStats {
        self.pool.stats
    }

    /// Blocks currently held by sequences.
    pub fn blocks_in_use(&self) -> usize {
        self.layout.n_blocks - self.pool.free.len()
    }
}
