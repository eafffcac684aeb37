//! Block bookkeeping for the KV cache: reference counts, a free list, and the prefix cache.
//!
//! A full block can be registered under the hash chain of its tokens (hash of the previous
//! block's hash and this block's tokens), so a later sequence whose prompt starts with the same
//! tokens reuses it instead of recomputing it. Unreferenced registered blocks stay cached and are
//! evicted least-recently-used first when the free list runs dry.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

/// Counts reported by `--json` outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Blocks handed to sequences (fresh or reused).
    pub allocated: u64,
    /// Blocks whose last reference was dropped.
    pub freed: u64,
    /// Allocations served by a block that had been used and released before.
    pub reused: u64,
    /// Blocks taken from the prefix cache instead of being recomputed.
    pub prefix_hits: u64,
}

/// The hash chain key of a full block: depends on every token before it and in it.
pub fn chain_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h = DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

/// A registered block's identity: its chain hash and its tokens (checked on lookup, so a hash
/// collision can never hand out the wrong keys and values).
struct Registered {
    hash: u64,
    tokens: Vec<u32>,
}

pub struct BlockPool {
    refs: Vec<u32>,
    registered: Vec<Option<Registered>>,
    by_hash: HashMap<u64, u32>,
    free: Vec<u32>,
    /// Unreferenced registered blocks by last use: tick → block.
    evictable: BTreeMap<u64, u32>,
    last_use: Vec<u64>,
    ever_used: Vec<bool>,
    tick: u64,
    pub stats: PoolStats,
}

impl BlockPool {
    pub fn new(n_blocks: usize) -> BlockPool {
        BlockPool {
            refs: vec![0; n_blocks],
            registered: (0..n_blocks).map(|_| None).collect(),
            by_hash: HashMap::new(),
            // Reversed so blocks are handed out in increasing order (contiguous for plain caches).
            free: (0..n_blocks as u32).rev().collect(),
            evictable: BTreeMap::new(),
            last_use: vec![0; n_blocks],
            ever_used: vec![false; n_blocks],
            tick: 0,
            stats: PoolStats::default(),
        }
    }

    /// Blocks that an allocation could use: free ones plus evictable cached ones.
    pub fn available(&self) -> usize {
        self.free.len() + self.evictable.len()
    }

    /// Blocks referenced by at least one sequence.
    pub fn in_use(&self) -> usize {
        self.refs.len() - self.available()
    }

    pub fn refs(&self, block: u32) -> u32 {
        self.refs[block as usize]
    }

    /// A block for exclusive use: a free one, else the least recently used cached one.
    pub fn alloc(&mut self) -> Option<u32> {
        let block = match self.free.pop() {
            Some(b) => b,
            None => {
                let (&tick, &b) = self.evictable.iter().next()?;
                self.evictable.remove(&tick);
                self.unregister(b);
                b
            }
        };
        self.refs[block as usize] = 1;
        self.stats.allocated += 1;
        if std::mem::replace(&mut self.ever_used[block as usize], true) {
            self.stats.reused += 1;
        }
        Some(block)
    }

    /// Drops one reference; the last one returns the block to the free list, or to the
    /// evictable cache if it is registered.
    pub fn release(&mut self, block: u32) {
        let r = &mut self.refs[block as usize];
        debug_assert!(*r > 0, "release of an unreferenced block");
        *r -= 1;
        if *r > 0 {
            return;
        }
        self.stats.freed += 1;
        if self.registered[block as usize].is_some() {
            self.tick += 1;
            self.last_use[block as usize] = self.tick;
            self.evictable.insert(self.tick, block);
        } else {
            self.free.push(block);
        }
    }

    /// The cached block holding exactly `tokens` after the prefix hashed `parent`, taking a reference.
    pub fn lookup(&mut self, parent: u64, tokens: &[u32]) -> Option<(u32, u64)> {
        let hash = chain_hash(parent, tokens);
        let block = *self.by_hash.get(&hash)?;
        let entry = self.registered[block as usize].as_ref()?;
        if entry.tokens != tokens {
            return None;
        }
        if self.refs[block as usize] == 0 {
            self.evictable.remove(&self.last_use[block as usize]);
        }
        self.refs[block as usize] += 1;
        self.stats.prefix_hits += 1;
        Some((block, hash))
    }

    /// Registers a full block under its chain hash (first writer wins; a duplicate stays private).
    pub fn register(&mut self, block: u32, parent: u64, tokens: &[u32]) -> u64 {
        let hash = chain_hash(parent, tokens);
        if self.registered[block as usize].is_none() && !self.by_hash.contains_key(&hash) {
            self.by_hash.insert(hash, block);
            self.registered[block as usize] = Some(Registered { hash, tokens: tokens.to_vec() });
        }
        hash
    }

    /// Forgets a block's content (it is about to be overwritten or evicted).
    pub fn unregister(&mut self, block: u32) {
        if let Some(entry) = self.registered[block as usize].take()
            && self.by_hash.get(&entry.hash) == Some(&block)
        {
            self.by_hash.remove(&entry.hash);
        }
    }

    pub fn is_registered(&self, block: u32) -> bool {
        self.registered[block as usize].is_some()
    }

    /// Checks the pool's invariants (for tests): every block is exactly one of referenced, free,
    /// or evictable, and the hash index points only at registered blocks.
    pub fn check(&self) -> Result<(), String> {
        let n = self.refs.len();
        let referenced = self.refs.iter().filter(|&&r| r > 0).count();
        if referenced + self.free.len() + self.evictable.len() != n {
            return Err(format!(
                "{referenced} referenced + {} free + {} evictable ≠ {n}",
                self.free.len(),
                self.evictable.len()
            ));
        }
        if self.free.iter().any(|&b| self.refs[b as usize] != 0 || self.registered[b as usize].is_some()) {
            return Err("a free block is referenced or registered".into());
        }
        if self.evictable.values().any(|&b| self.refs[b as usize] != 0 || self.registered[b as usize].is_none()) {
            return Err("an evictable block is referenced or unregistered".into());
        }
        if self.by_hash.values().any(|&b| self.registered[b as usize].is_none()) {
            return Err("the hash index points at an unregistered block".into());
        }
        Ok(())
    }
}
