//! The llama-family forward pass, written once against the `Backend` trait. It reads top to
//! bottom like the paper: one backend call per line, a shape on every buffer.

use crate::backend::{AttnShape, Backend};
use crate::error::Result;
use crate::gguf::Gguf;
use crate::kv_cache::KvCache;
use crate::model::{Activations, Config, Weights};

pub struct Llama<B: Backend> {
    pub config: Config,
    pub weights: Weights<B>,
}

impl<B: Backend> Llama<B> {
    pub fn load(backend: &B, gguf: &Gguf) -> Result<Llama<B>> {
        let config = Config::from_gguf(gguf)?;
        let weights = Weights::load(backend, gguf, &config)?;
        Ok(Llama { config, weights })
    }

    /// Runs the batch whose inputs `a` holds (ids, positions, slots, block table, logit rows),
    /// appending its K and V to `cache`; leaves logits in `a.logits` [n_logits, vocab].
    /// Only as many layers run as `cache` holds: a shallow cache makes a self-speculation draft.
    pub fn forward(&self, be: &B, cache: &mut KvCache<B>, a: &mut Activations<B>) -> Result<()> {
        let c = &self.config;
        let w = &self.weights;
        let eps = c.norm_eps;
        let shape = AttnShape {
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
        };
        be.embed(&w.embed, &a.ids, &mut a.x)?; // x: [n_tokens, d_model]
        // Only as many layers as the cache holds (a shallow cache is a self-speculation draft).
        let layers = &w.layers[..w.layers.len().min(cache.layers.len())];
        if let Some(first) = layers.first() {
            be.rms_norm(&a.x, &first.attn_norm, eps, &mut a.xn)?; // xn: [n_tokens, d_model]
        }
        for (i, (layer, kv)) in layers.iter().zip(cache.layers.iter_mut()).enumerate() {
            // Attention block: x += W_o · attention(rope(W_q · xn), cache ∪ rope(W_k · xn), W_v · xn), xn = norm(x)
            // q: [n_tokens, n_heads · head_dim]; k, v: [n_tokens, n_kv_heads · head_dim]
            be.matmuls(&a.xn, &mut [(&layer.w_q, &mut a.q), (&layer.w_k, &mut a.k), (&layer.w_v, &mut a.v)])?;
            if let (Some(b_q), Some(b_k), Some(b_v)) = (&layer.b_q, &layer.b_k, &layer.b_v) {
                be.add_bias(&mut a.q, b_q)?;
                be.add_bias(&mut a.k, b_k)?;
                be.add_bias(&mut a.v, b_v)?;
            }
            be.rope(&mut a.q, &a.batch.pos, &c.rope)?;
            be.rope(&mut a.k, &a.batch.pos, &c.rope)?;
            be.kv_write(&a.k, &a.v, &a.batch.slot, kv)?; // cache[slot[t]] = k[t], v[t]
            be.attention(&a.q, kv, &a.batch, &shape, &mut a.att)?; // att: [n_tokens, n_heads · head_dim]
            be.matmul(&a.att, &layer.w_o, &mut a.xb)?; // xb: [n_tokens, d_model]
            be.add_rms_norm(&mut a.x, &a.xb, &layer.ffn_norm, eps, &mut a.xn)?;

            // Feed-forward block: x += W_down · (silu(W_gate · xn) ⊙ W_up · xn), xn = next layer's norm(x)
            be.matmuls(&a.xn, &mut [(&layer.w_gate, &mut a.gate), (&layer.w_up, &mut a.up)])?; // [n_tokens, d_ff]
            // hidden_ff = silu(gate) ⊙ up: [n_tokens, d_ff]; xb = W_down · hidden_ff: [n_tokens, d_model]
            be.silu_mul_matmul(&a.gate, &a.up, &layer.w_down, &mut a.hidden_ff, &mut a.xb)?;
            match layers.get(i + 1) {
                Some(next) => be.add_rms_norm(&mut a.x, &a.xb, &next.attn_norm, eps, &mut a.xn)?,
                None => be.add_assign(&mut a.x, &a.xb)?,
            }
        }
        // Only the rows that need logits go through the (vocab-wide) output projection.
        be.gather_rows(&a.x, &a.logit_rows, &mut a.last)?; // last: [n_logits, d_model]
        be.rms_norm(&a.last, &w.output_norm, eps, &mut a.last_norm)?;
        be.matmul(&a.last_norm, w.lm_head(), &mut a.logits) // logits: [n_logits, vocab]
    }
}
