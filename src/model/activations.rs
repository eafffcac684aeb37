//! Buffers for one batch shape, allocated once and reused for every forward call of that shape,
//! so the decode loop allocates nothing (llama2.c's RunState).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{AttnBatch, Backend, DType, Tensor};
use crate::error::Result;
use crate::model::Config;

pub struct Activations<B: Backend> {
    /// Unique per allocation: the `begin_step` key of passes over these buffers.
    pub step_key: u64,
    pub n_tokens: usize,
    pub n_logits: usize,
    pub ids: Tensor<B>,            // u32 [n_tokens, 1]
    pub batch: AttnBatch<B>,       // seq, pos, slot: u32 [n_tokens, 1]; block_table: u32 [n_tokens, max_blocks]
    pub x: Tensor<B>,              // [n_tokens, d_model]  residual stream
    pub xn: Tensor<B>,             // [n_tokens, d_model]  normed input of a sublayer
    pub xb: Tensor<B>,             // [n_tokens, d_model]  sublayer output
    pub xp: Tensor<B>,             // [n_tokens, d_model]  post-normed sublayer output (gemma3; else 0 × 0)
    pub q: Tensor<B>,              // [n_tokens, q_dim]
    pub k: Tensor<B>,              // [n_tokens, kv_dim]
    pub v: Tensor<B>,              // [n_tokens, kv_dim]
    pub att: Tensor<B>,            // [n_tokens, q_dim]    attention output, heads concatenated
    pub gate: Tensor<B>,           // [n_tokens, d_ff]
    pub up: Tensor<B>,             // [n_tokens, d_ff]
    pub hidden_ff: Tensor<B>,      // [n_tokens, d_ff]     silu(gate) · up
    pub logit_rows: Tensor<B>,     // u32 [n_logits, 1]    which rows produce logits
    pub last: Tensor<B>,           // [n_logits, d_model]
    pub last_norm: Tensor<B>,      // [n_logits, d_model]
    pub logits: Tensor<B>,         // [n_logits, vocab]
    pub argmax: Tensor<B>,         // u32 [n_logits, 1]
    pub top_k: Option<TopKOut<B>>, // allocated by the first top_k call (its k is the sampler's)
}

/// `Backend::top_k`'s outputs for one k.
pub struct TopKOut<B: Backend> {
    pub ids: Tensor<B>,  // u32 [n_logits, k]
    pub vals: Tensor<B>, // [n_logits, k + 1]  their logits, then the row's log-sum-exp
}

impl<B: Backend> Activations<B> {
    pub fn new(
        be: &B,
        c: &Config,
        n_tokens: usize,
        n_logits: usize,
        max_blocks: usize,
        block_size: usize,
        decode: bool,
    ) -> Result<Self> {
        let f = |rows, cols| be.alloc(DType::F32, rows, cols);
        let u = |rows, cols| be.alloc(DType::U32, rows, cols);
        static NEXT_KEY: AtomicU64 = AtomicU64::new(0);
        Ok(Activations {
            step_key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            n_tokens,
            n_logits,
            ids: u(n_tokens, 1)?,
            batch: AttnBatch {
                seq: u(n_tokens, 1)?,
                pos: u(n_tokens, 1)?,
                slot: u(n_tokens, 1)?,
                block_table: u(n_tokens, max_blocks)?,
                block_size,
                decode,
            },
            x: f(n_tokens, c.d_model)?,
            xn: f(n_tokens, c.d_model)?,
            xb: f(n_tokens, c.d_model)?,
            xp: if c.post_norms { f(n_tokens, c.d_model)? } else { f(0, 0)? },
            q: f(n_tokens, c.q_dim())?,
            k: f(n_tokens, c.kv_dim())?,
            v: f(n_tokens, c.kv_dim())?,
            att: f(n_tokens, c.q_dim())?,
            gate: f(n_tokens, c.d_ff)?,
            up: f(n_tokens, c.d_ff)?,
            hidden_ff: f(n_tokens, c.d_ff)?,
            logit_rows: u(n_logits, 1)?,
            last: f(n_logits, c.d_model)?,
            last_norm: f(n_logits, c.d_model)?,
            logits: f(n_logits, c.vocab_size)?,
            argmax: u(n_logits, 1)?,
            top_k: None,
        })
    }

    /// The logits and top_k's outputs for `k` (allocated on first use, again only if k changes).
    pub fn logits_and_top_k(&mut self, be: &B, k: usize) -> Result<(&Tensor<B>, &mut TopKOut<B>)> {
        if self.top_k.as_ref().is_none_or(|t| t.ids.cols != k) {
            let (ids, vals) = (be.alloc(DType::U32, self.n_logits, k)?, be.alloc(DType::F32, self.n_logits, k + 1)?);
            self.top_k = Some(TopKOut { ids, vals });
        }
        Ok((&self.logits, self.top_k.as_mut().expect("allocated above")))
    }
}
