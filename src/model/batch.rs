//! A forward call's input: tokens from one or more sequences, each at its own position. Prefill
//! chunks, single-token decode, batched decode and k-token speculative verification are all a
//! `Batch`; the model never knows which.

use crate::kv_cache::SeqId;

/// One token's place in the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchToken {
    pub token: u32,
    pub seq: SeqId,
    /// Absolute position in its sequence.
    pub pos: usize,
    /// Whether the caller wants this token's logits.
    pub logits: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub tokens: Vec<BatchToken>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn push(&mut self, token: u32, seq: SeqId, pos: usize, logits: bool) {
        self.tokens.push(BatchToken { token, seq, pos, logits });
    }

    /// `tokens` of one sequence from position `start`, with logits for the last only or for all.
    pub fn sequence(seq: SeqId, start: usize, tokens: &[u32], all_logits: bool) -> Batch {
        let mut batch = Batch::new();
        for (i, &t) in tokens.iter().enumerate() {
            batch.push(t, seq, start + i, all_logits || i + 1 == tokens.len());
        }
        batch
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Rows that produce logits, in batch order.
    pub fn n_logits(&self) -> usize {
        self.tokens.iter().filter(|t| t.logits).count()
    }

    /// Distinct sequences in order of first appearance.
    pub fn seqs(&self) -> Vec<SeqId> {
        let mut seqs: Vec<SeqId> = Vec::new();
        for t in &self.tokens {
            if !seqs.contains(&t.seq) {
                seqs.push(t.seq);
            }
        }
        seqs
    }
}
