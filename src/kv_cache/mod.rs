//! The KV cache: a pool of fixed-size blocks ("pages") of K and V slots for every layer, and a
//! block table per sequence. The plain cache is the special case of one block per sequence,
//! `block_size` = the context length (one contiguous region each); the paged cache uses small
//! pages allocated on demand from a shared pool. Both go through the same block table, so the
//! attention kernels see one layout.
//!
//! With prefix caching on, full pages are registered under the hash chain of their tokens and
//! shared between sequences by reference count; a sequence that writes into a shared page first
//! copies it (copy-on-write); unreferenced registered pages stay cached until evicted (LRU).
//!
//! With a sliding window (`with_window`: the longest window of the model's layers, given only
//! when every layer has one), a block that lies wholly before the first key the sequence's next
//! token can see is given back when the sequence grows; its table entry becomes `FREED`, which
//! attention never reads (`Backend::attention` skips blocks before the window). A model with a
//! global layer (Gemma 3: every 6th) keeps every block: its global layers still read them.

mod pool;

use crate::backend::{Backend, DType, KvLayer};
use crate::error::{Error, Result};

pub use pool::{BlockPool, PoolStats, chain_hash};

/// How the pool is cut into blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLayout {
    /// Tokens per block.
    pub block_size: usize,
    /// Blocks in the pool.
    pub n_blocks: usize,
    /// Share full blocks between sequences with equal prefixes.
    pub prefix_caching: bool,
    /// What a slot's values are stored as: `F32` (every backend, the default) or `F16` (half the
    /// bytes for attention to read; cuda only, others refuse it when the cache is made).
    pub kv_dtype: DType,
}

impl CacheLayout {
    /// One contiguous region of `context` slots for each of `max_seqs` sequences.
    pub fn plain(max_seqs: usize, context: usize) -> CacheLayout {
        CacheLayout { block_size: context, n_blocks: max_seqs, prefix_caching: false, kv_dtype: DType::F32 }
    }

    /// `n_pages` pages of `page_size` slots shared by all sequences, with prefix caching.
    pub fn paged(page_size: usize, n_pages: usize) -> CacheLayout {
        CacheLayout { block_size: page_size, n_blocks: n_pages, prefix_caching: true, kv_dtype: DType::F32 }
    }

    /// The same layout with slots stored as `kv_dtype` (`F32`, `F16` or `Q8_0`).
    pub fn with_kv_dtype(self, kv_dtype: DType) -> CacheLayout {
        CacheLayout { kv_dtype, ..self }
    }

    pub fn n_slots(&self) -> usize {
        self.block_size * self.n_blocks
    }
}

/// Identifies one sequence's cache.
pub type SeqId = usize;

/// The block-table entry of a block given back because it fell out of every layer's window.
pub const FREED: u32 = u32::MAX;

/// One sequence: its blocks in position order, the tokens cached so far, and the chain hashes
/// of its leading full blocks.
#[derive(Default)]
struct SeqBlocks {
    blocks: Vec<u32>,
    tokens: Vec<u32>,
    hashes: Vec<u64>,
}

pub struct KvCache<B: Backend> {
    pub layers: Vec<KvLayer<B>>, // per layer: k, v [n_slots, kv_dim]
    pub layout: CacheLayout,
    pool: BlockPool,
    seqs: Vec<Option<SeqBlocks>>,
    /// Keys every layer's attention sees at most (`None`: some layer sees all positions).
    window: Option<usize>,
}

impl<B: Backend> KvCache<B> {
    /// A cache of `n_layers` layers whose slots hold `kv_dim` values (all KV heads) each.
    pub fn new(backend: &B, n_layers: usize, kv_dim: usize, layout: CacheLayout) -> Result<KvCache<B>> {
        if layout.block_size == 0 || layout.n_blocks == 0 || layout.n_slots() > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!("KV cache layout {layout:?} is empty or too large")));
        }
        if layout.kv_dtype == DType::U32 {
            return Err(Error::InvalidArgument("KV cache values must be F32, F16 or Q8_0, not U32".into()));
        }
        let n_slots = layout.n_slots();
        let layers = (0..n_layers)
            .map(|_| {
                Ok(KvLayer {
                    k: backend.alloc(layout.kv_dtype, n_slots, kv_dim)?,
                    v: backend.alloc(layout.kv_dtype, n_slots, kv_dim)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, layout, pool: BlockPool::new(layout.n_blocks), seqs: Vec::new(), window: None })
    }

    /// The same cache for a model whose every layer attends to at most `window` keys (`None`:
    /// some layer is global), so blocks wholly before every layer's window can be given back.
    pub fn with_window(mut self, window: Option<usize>) -> KvCache<B> {
        self.window = window.filter(|&w| w > 0);
        self
    }

    /// The first position a token at `pos` may still read (0 without a window).
    fn first_needed(&self, pos: usize) -> usize {
        self.window.map_or(0, |w| (pos + 1).saturating_sub(w))
    }

    /// Gives back the sequence's blocks that lie wholly before what its token at `pos` (and every
    /// later one) can see.
    fn free_before_window(&mut self, id: SeqId, pos: usize) -> Result<()> {
        let whole = self.first_needed(pos) / self.layout.block_size;
        let seq =
            self.seqs.get_mut(id).and_then(Option::as_mut).ok_or_else(|| Error::Cache(format!("no sequence {id}")))?;
        for block in seq.blocks.iter_mut().take(whole).filter(|b| **b != FREED) {
            self.pool.release(std::mem::replace(block, FREED));
        }
        Ok(())
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
        Ok(self.seq(id)?.tokens.len())
    }

    /// The tokens whose keys and values this sequence holds.
    pub fn seq_tokens(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.tokens)
    }

    /// The longest sequence a block table can describe.
    pub fn max_seq_len(&self) -> usize {
        self.layout.n_slots()
    }

    /// Blocks a sequence would need to hold `len` positions.
    pub fn blocks_for(&self, len: usize) -> usize {
        len.div_ceil(self.layout.block_size)
    }

    /// Blocks an allocation can still get (free, or cached and evictable).
    pub fn free_blocks(&self) -> usize {
        self.pool.available()
    }

    /// Blocks currently referenced by sequences.
    pub fn blocks_in_use(&self) -> usize {
        self.pool.in_use()
    }

    pub fn stats(&self) -> PoolStats {
        self.pool.stats
    }

    /// Blocks that appending `n` tokens to the sequence would take from the pool (new blocks,
    /// plus one for a copy-on-write of a shared last block).
    pub fn blocks_needed(&self, id: SeqId, n: usize) -> Result<usize> {
        let seq = self.seq(id)?;
        let len = seq.tokens.len();
        let grow = self.blocks_for(len + n).saturating_sub(seq.blocks.len());
        let cow = len % self.layout.block_size != 0 && self.pool.refs(seq.blocks[len / self.layout.block_size]) > 1;
        Ok(grow + cow as usize)
    }

    /// Attaches cached blocks that hold a prefix of `prompt` to an empty sequence and returns how
    /// many prompt tokens they cover. At least one token is always left to compute, so the
    /// caller gets the logits of the last prompt token.
    pub fn reuse_prefix(&mut self, id: SeqId, prompt: &[u32]) -> Result<usize> {
        if !self.layout.prefix_caching || self.seq_len(id)? != 0 {
            return Ok(0);
        }
        let bs = self.layout.block_size;
        let (mut blocks, mut hashes) = (Vec::new(), Vec::new());
        for chunk in prompt[..prompt.len().saturating_sub(1)].chunks_exact(bs) {
            let parent = hashes.last().copied().unwrap_or(0);
            match self.pool.lookup(parent, chunk) {
                Some((block, hash)) => {
                    blocks.push(block);
                    hashes.push(hash);
                }
                None => break,
            }
        }
        let matched = blocks.len() * bs;
        let seq = self.seq_mut(id)?;
        seq.blocks = blocks;
        seq.hashes = hashes;
        seq.tokens = prompt[..matched].to_vec();
        Ok(matched)
    }

    /// Makes room for `tokens` at the end of a sequence: allocates blocks, copies a shared last
    /// block before it is written (copy-on-write), and records the tokens. Full blocks are
    /// registered for prefix sharing. On failure nothing changes, so the caller may preempt
    /// another sequence and retry.
    pub fn append(&mut self, backend: &B, id: SeqId, tokens: &[u32]) -> Result<()> {
        let need = self.blocks_needed(id, tokens.len())?;
        if need > self.pool.available() {
            return Err(Error::Cache(format!(
                "out of KV blocks: sequence {id} needs {need} more, {} available",
                self.pool.available()
            )));
        }
        let bs = self.layout.block_size;
        let len = self.seq_len(id)?;
        if len % bs != 0 {
            self.make_private(backend, id, len / bs)?;
        }
        for _ in self.seq(id)?.blocks.len()..self.blocks_for(len + tokens.len()) {
            let block = self.pool.alloc().expect("availability checked above");
            self.seq_mut(id)?.blocks.push(block);
        }
        self.seq_mut(id)?.tokens.extend_from_slice(tokens);
        if self.layout.prefix_caching {
            self.register_full_blocks(id)?;
        }
        // The first of these tokens sees the furthest back: what lies before its window is done.
        self.free_before_window(id, len)
    }

    /// Gives the sequence its own copy of block `index` if another sequence shares it, and
    /// forgets the block's registered content since it is about to change.
    fn make_private(&mut self, backend: &B, id: SeqId, index: usize) -> Result<()> {
        let bs = self.layout.block_size;
        let old = self.seq(id)?.blocks[index];
        if self.pool.refs(old) > 1 {
            let new = self.pool.alloc().ok_or_else(|| Error::Cache("out of KV blocks for copy-on-write".into()))?;
            for layer in &mut self.layers {
                backend.copy_slots(layer, old as usize * bs, new as usize * bs, bs)?;
            }
            self.pool.release(old);
            self.seq_mut(id)?.blocks[index] = new;
        } else {
            self.pool.unregister(old);
        }
        Ok(())
    }

    fn register_full_blocks(&mut self, id: SeqId) -> Result<()> {
        let bs = self.layout.block_size;
        let seq = self.seqs[id].as_mut().ok_or_else(|| Error::Cache(format!("no sequence {id}")))?;
        while seq.hashes.len() < seq.tokens.len() / bs {
            let b = seq.hashes.len();
            let parent = seq.hashes.last().copied().unwrap_or(0);
            let hash = self.pool.register(seq.blocks[b], parent, &seq.tokens[b * bs..(b + 1) * bs]);
            seq.hashes.push(hash);
        }
        Ok(())
    }

    /// Cuts a sequence back to `len` positions (speculative rollback), releasing whole blocks.
    /// Cutting back into blocks given back (outside the window) is an error, but to 0 (removal).
    pub fn truncate(&mut self, id: SeqId, len: usize) -> Result<()> {
        let bs = self.layout.block_size;
        let keep = self.blocks_for(len);
        let first = self.first_needed(len);
        let freed = self.seq(id)?.blocks.get(first / bs..keep).is_some_and(|b| b.contains(&FREED));
        if len > 0 && len < self.seq_len(id)? && freed {
            return Err(Error::Cache(format!(
                "sequence {id} cannot be cut back to {len} positions: blocks its window needs were given back"
            )));
        }
        let seq =
            self.seqs.get_mut(id).and_then(Option::as_mut).ok_or_else(|| Error::Cache(format!("no sequence {id}")))?;
        if len >= seq.tokens.len() {
            return Ok(());
        }
        seq.tokens.truncate(len);
        seq.hashes.truncate(len / bs);
        let dropped: Vec<u32> = seq.blocks.drain(keep.min(seq.blocks.len())..).collect();
        dropped.into_iter().filter(|&b| b != FREED).for_each(|b| self.pool.release(b));
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
        let block = seq.blocks.get(pos / self.layout.block_size).filter(|&&b| b != FREED).ok_or_else(|| {
            Error::Cache(format!(
                "position {pos} of sequence {id} is beyond its {} positions or outside the window",
                seq.tokens.len()
            ))
        })?;
        Ok(*block * self.layout.block_size as u32 + (pos % self.layout.block_size) as u32)
    }

    /// The sequence's block ids in position order (`FREED` for blocks given back).
    pub fn blocks(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.blocks)
    }

    /// Checks the pool's invariants against the sequences' block lists (for tests).
    pub fn check(&self) -> std::result::Result<(), String> {
        self.pool.check()?;
        let mut refs = vec![0u32; self.layout.n_blocks];
        for seq in self.seqs.iter().flatten() {
            if seq.blocks.len() != self.blocks_for(seq.tokens.len()) {
                return Err(format!("{} blocks for {} tokens", seq.blocks.len(), seq.tokens.len()));
            }
            seq.blocks.iter().filter(|&&b| b != FREED).for_each(|&b| refs[b as usize] += 1);
        }
        match (0..self.layout.n_blocks).find(|&b| refs[b] != self.pool.refs(b as u32)) {
            Some(b) => {
                Err(format!("block {b}: {} sequence references, pool count {}", refs[b], self.pool.refs(b as u32)))
            }
            None => Ok(()),
        }
    }
}
