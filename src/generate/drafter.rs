//! Drafters propose the next few tokens for the target model to verify in one forward pass.
//! `model` runs a smaller model (or, `self`, the target's own first layers) with its own KV
//! cache; `ngram` follows the most frequent continuation seen so far; `lookup` copies what
//! followed the latest earlier occurrence of the last few tokens (prompt lookup decoding).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::backend::Backend;
use crate::error::Result;
use crate::generate::sampler::Sampler;
use crate::kv_cache::SeqId;
use crate::model::{Batch, Runner};

/// Proposed tokens, with the draft's probability distribution for each when it sampled them
/// (`None`: the drafter is deterministic, q is a point mass on each token).
pub struct Draft {
    pub tokens: Vec<u32>,
    pub probs: Option<Vec<Vec<f32>>>,
}

pub trait Drafter {
    fn name(&self) -> &'static str;
    /// Up to `k` tokens to follow `context` (every accepted token so far, prompt included).
    fn propose(&mut self, context: &[u32], k: usize) -> Result<Draft>;
    /// The verifier kept `context[..len]`: forget anything drafted beyond it.
    fn rollback(&mut self, len: usize) -> Result<()>;
    /// Forward passes of a draft model so far (0 for model-free drafters).
    fn forward_passes(&self) -> u64 {
        0
    }
    /// Tokens of `context` a draft model has not seen yet (0 for model-free drafters).
    fn behind(&self, _context: &[u32]) -> Result<usize> {
        Ok(0)
    }
    /// Feeds a draft model up to `n` of the tokens it has not seen, in batched passes, keeping
    /// the last for `propose` (whose first step needs its logits). One token is one decoding step.
    fn catch_up(&mut self, _context: &[u32], _n: usize) -> Result<()> {
        Ok(())
    }
}

/// A draft model with its own cache: a separate GGUF, or the target's first layers.
pub struct ModelDrafter<B: Backend> {
    runner: Runner<B>,
    seq: SeqId,
    /// Samples drafts from the draft's own processed distribution (sampled verification);
    /// `None` drafts greedily.
    sampler: Option<Sampler>,
    chunk: usize,
}

impl<B: Backend> ModelDrafter<B> {
    pub fn new(mut runner: Runner<B>, sampler: Option<Sampler>, chunk: usize) -> ModelDrafter<B> {
        let seq = runner.cache.add_seq();
        ModelDrafter { runner, seq, sampler, chunk: chunk.max(1) }
    }

    /// Two decoding steps, then dropped from the cache, so the draft's kernels are compiled
    /// (cuda) and its weights paged in before a generation is timed (llama.cpp warms up each
    /// context the same way): the adaptive window times the draft's first real step.
    pub fn warmed_up(mut self) -> Result<ModelDrafter<B>> {
        let start = self.runner.cache.seq_len(self.seq)?;
        for pos in start..start + 2 {
            self.runner.forward_argmax(&Batch::sequence(self.seq, pos, &[0], false))?;
        }
        self.runner.cache.truncate(self.seq, start)?;
        self.runner.forward_passes = 0;
        Ok(self)
    }

    /// Feeds `tokens` at the end of the draft's sequence; returns the next token and its distribution.
    fn step(&mut self, tokens: &[u32], history: &[u32]) -> Result<(u32, Option<Vec<f32>>)> {
        let start = self.runner.cache.seq_len(self.seq)?;
        let mut fed = 0;
        while tokens.len() - fed > self.chunk {
            let batch = Batch::sequence(self.seq, start + fed, &tokens[fed..fed + self.chunk], false);
            self.runner.forward(&batch)?;
            fed += self.chunk;
        }
        let batch = Batch::sequence(self.seq, start + fed, &tokens[fed..], false);
        match &mut self.sampler {
            None => Ok((self.runner.forward_argmax(&batch)?[0], None)),
            Some(sampler) => {
                self.runner.forward(&batch)?;
                let mut probs = Vec::new();
                sampler.distribution(self.runner.logits(0), history, &mut probs);
                Ok((sampler.sample_from(&probs), Some(probs)))
            }
        }
    }
}

impl<B: Backend> Drafter for ModelDrafter<B> {
    fn name(&self) -> &'static str {
        "model"
    }

    fn propose(&mut self, context: &[u32], k: usize) -> Result<Draft> {
        let cached = self.runner.cache.seq_len(self.seq)?;
        let room = self.runner.context.saturating_sub(context.len());
        let k = k.min(room);
        if k == 0 || cached >= context.len() {
            return Ok(Draft { tokens: Vec::new(), probs: None });
        }
        let mut history = context.to_vec();
        let (mut tokens, mut probs) = (Vec::with_capacity(k), Vec::with_capacity(k));
        let (mut next, mut p) = self.step(&context[cached..], &history)?;
        loop {
            tokens.push(next);
            history.push(next);
            probs.extend(p);
            if tokens.len() == k {
                break;
            }
            (next, p) = self.step(&[next], &history)?;
        }
        let probs = if self.sampler.is_some() { Some(probs) } else { None };
        Ok(Draft { tokens, probs })
    }

    fn rollback(&mut self, len: usize) -> Result<()> {
        self.runner.cache.truncate(self.seq, len)
    }

    fn forward_passes(&self) -> u64 {
        self.runner.forward_passes
    }

    fn behind(&self, context: &[u32]) -> Result<usize> {
        Ok(context.len().saturating_sub(self.runner.cache.seq_len(self.seq)?))
    }

    fn catch_up(&mut self, context: &[u32], n: usize) -> Result<()> {
        let cached = self.runner.cache.seq_len(self.seq)?;
        let end = (cached + n).min(context.len().saturating_sub(1));
        for (i, piece) in context.get(cached..end).unwrap_or_default().chunks(self.chunk).enumerate() {
            // The device argmax of each chunk's last row: the least to read back.
            self.runner.forward_argmax(&Batch::sequence(self.seq, cached + i * self.chunk, piece, false))?;
        }
        Ok(())
    }
}

/// Most frequent continuation of the last `n - 1` tokens, counted over the accepted context;
/// shorter contexts are tried when the longest has never been seen.
pub struct NgramDrafter {
    n: usize,
    /// (context length, hash of that many tokens) → next token → count.
    counts: HashMap<(usize, u64), HashMap<u32, u32>>,
    counted: usize,
}

impl NgramDrafter {
    pub fn new(n: usize) -> NgramDrafter {
        NgramDrafter { n: n.max(2), counts: HashMap::new(), counted: 0 }
    }

    fn key(tokens: &[u32]) -> (usize, u64) {
        (tokens.len(), hash_tokens(tokens))
    }

    fn count_up_to(&mut self, context: &[u32]) {
        for end in self.counted.max(1)..context.len() {
            for ctx_len in 1..self.n {
                if end >= ctx_len {
                    let key = Self::key(&context[end - ctx_len..end]);
                    *self.counts.entry(key).or_default().entry(context[end]).or_default() += 1;
                }
            }
        }
        self.counted = self.counted.max(context.len());
    }

    fn predict(&self, tokens: &[u32]) -> Option<u32> {
        (1..self.n).rev().filter(|&l| tokens.len() >= l).find_map(|l| {
            let next = self.counts.get(&Self::key(&tokens[tokens.len() - l..]))?;
            // Highest count; ties go to the lowest id so drafts are reproducible.
            next.iter().max_by_key(|&(&id, &c)| (c, std::cmp::Reverse(id))).map(|(&id, _)| id)
        })
    }
}

impl Drafter for NgramDrafter {
    fn name(&self) -> &'static str {
        "ngram"
    }

    fn propose(&mut self, context: &[u32], k: usize) -> Result<Draft> {
        self.count_up_to(context);
        let mut seq = context.to_vec();
        while seq.len() - context.len() < k {
            match self.predict(&seq) {
                Some(t) => seq.push(t),
                None => break,
            }
        }
        Ok(Draft { tokens: seq[context.len()..].to_vec(), probs: None })
    }

    fn rollback(&mut self, len: usize) -> Result<()> {
        // Only accepted tokens are ever counted; a shorter context only needs recounting if the
        // verifier rewinds below what was counted, which it never does.
        self.counted = self.counted.min(len);
        Ok(())
    }
}

/// Prompt lookup: match the last `max_ngram` … 1 tokens at their latest earlier occurrence in
/// the context and propose the tokens that followed it.
pub struct LookupDrafter {
    max_ngram: usize,
}

impl LookupDrafter {
    pub fn new(max_ngram: usize) -> LookupDrafter {
        LookupDrafter { max_ngram: max_ngram.max(1) }
    }
}

impl Drafter for LookupDrafter {
    fn name(&self) -> &'static str {
        "lookup"
    }

    fn propose(&mut self, context: &[u32], k: usize) -> Result<Draft> {
        let n_ctx = context.len();
        for n in (1..=self.max_ngram.min(n_ctx.saturating_sub(1))).rev() {
            let pattern = &context[n_ctx - n..];
            // Latest earlier occurrence that has at least one token after it.
            let found = (0..n_ctx - n).rev().find(|&i| &context[i..i + n] == pattern);
            if let Some(i) = found {
                let tokens = context[i + n..(i + n + k).min(n_ctx)].to_vec();
                return Ok(Draft { tokens, probs: None });
            }
        }
        Ok(Draft { tokens: Vec::new(), probs: None })
    }

    fn rollback(&mut self, _len: usize) -> Result<()> {
        Ok(())
    }
}

/// A hash of a token run (the n-gram drafter's table key).
fn hash_tokens(tokens: &[u32]) -> u64 {
    let mut h = DefaultHasher::new();
    tokens.hash(&mut h);
    h.finish()
}
