//! The decoder forward pass of every architecture (llama, qwen2, qwen3, gemma3), written once
//! against the `Backend` trait. It reads top to bottom like the paper: one backend call per line,
//! a shape on every buffer; what an architecture adds is a weight that is there or not (biases,
//! q/k norms, post-norms) or a setting in `Config` (activation, scales, each layer's window and RoPE).

use crate::backend::{AttnShape, Backend, Tensor};
use crate::error::Result;
use crate::gguf::Gguf;
use crate::kv_cache::KvCache;
use crate::model::config::Activation;
use crate::model::{Activations, Config, Placement, Weights};

/// Which matrices a `forward_observed` input feeds (of one layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulInput {
    /// The normed residual: attn_q, attn_k, attn_v.
    Attn,
    /// The attention output, heads concatenated: attn_output.
    AttnOut,
    /// The normed residual after attention: ffn_gate, ffn_up.
    Ffn,
    /// act(gate) ⊙ up: ffn_down.
    FfnDown,
}

impl MatmulInput {
    /// The llama.cpp name stems (`blk.i.STEM.weight`) of the matrices this input feeds.
    pub const fn weights(self) -> &'static [&'static str] {
        match self {
            MatmulInput::Attn => &["attn_q", "attn_k", "attn_v"],
            MatmulInput::AttnOut => &["attn_output"],
            MatmulInput::Ffn => &["ffn_gate", "ffn_up"],
            MatmulInput::FfnDown => &["ffn_down"],
        }
    }
}

/// `observe(layer, input, x)` of `forward_observed`: called once per matmul input of each layer.
pub type Observer<'a, B> = dyn FnMut(usize, MatmulInput, &Tensor<B>) -> Result<()> + Send + 'a;

pub struct Llama<B: Backend> {
    pub config: Config,
    pub weights: Weights<B>,
}

impl<B: Backend> Llama<B> {
    pub fn load(backend: &B, gguf: &Gguf) -> Result<Llama<B>> {
        Llama::load_placed(backend, gguf, &Placement::all())
    }

    /// Loads with the first `placement.resident` layers on the device and the rest streamed.
    pub fn load_placed(backend: &B, gguf: &Gguf, placement: &Placement) -> Result<Llama<B>> {
        let config = Config::from_gguf(gguf)?;
        let weights = Weights::load_placed(backend, gguf, &config, placement)?;
        Ok(Llama { config, weights })
    }

    /// Runs the batch whose inputs `a` holds (ids, positions, slots, block table, logit rows),
    /// appending its K and V to `cache`; leaves logits in `a.logits` [n_logits, vocab].
    /// Only as many layers run as `cache` holds: a shallow cache makes a self-speculation draft.
    pub fn forward(&self, be: &B, cache: &mut KvCache<B>, a: &mut Activations<B>) -> Result<()> {
        self.forward_observed(be, cache, a, &mut |_, _, _| Ok(()))
    }

    /// `forward`, handing each layer's matmul inputs to `observe` once they are computed (the
    /// calibration of `gptq` reads them). `FfnDown` is `a.hidden_ff` after the fused
    /// `silu_mul_matmul`: the CPU backend writes it, a GPU backend's fused path may not.
    pub fn forward_observed(
        &self,
        be: &B,
        cache: &mut KvCache<B>,
        a: &mut Activations<B>,
        observe: &mut Observer<'_, B>,
    ) -> Result<()> {
        let c = &self.config;
        let w = &self.weights;
        let eps = c.norm_eps;
        let ff = w.rope_freqs.as_ref(); // Llama 3's per-pair RoPE frequency factors, if any
        be.embed(&w.embed, &a.ids, c.embed_scale, &mut a.x)?; // x: [n_tokens, d_model]
        // Only as many layers as the cache holds (a shallow cache is a self-speculation draft).
        let layers = &w.layers[..w.layers.len().min(cache.layers.len())];
        // The previous layer's output, added to x as the next norm reads it (None before layer 0).
        let mut residual = None;
        w.begin_layers(be, layers.len())?; // streamed layers' copies start (model/offload.rs)
        for (i, (layer, kv)) in layers.iter().zip(cache.layers.iter_mut()).enumerate() {
            let m = w.matrices(be, i)?; // resident, or streamed into a ring slot
            let at = &c.layers[i];
            let shape = AttnShape {
                n_heads: c.n_heads,
                n_kv_heads: c.n_kv_heads,
                head_dim: c.head_dim,
                scale: c.attn_scale,
                window: at.window,
            };
            // Attention block: x += [post_norm] W_o · attention(rope([norm] W_q · xn), cache ∪ rope([norm] W_k · xn), W_v · xn)
            // q: [n_tokens, n_heads · head_dim]; k, v: [n_tokens, n_kv_heads · head_dim]
            // x += the previous layer's output; xn = norm(x): [n_tokens, d_model]; then q, k, v of xn
            let y = residual.map(|out: Out| out.of(&a.xb, &a.xp));
            let qkv = &mut [(&m.w_q, &mut a.q), (&m.w_k, &mut a.k), (&m.w_v, &mut a.v)];
            be.norm_matmuls(&mut a.x, y, &layer.attn_norm, eps, &mut a.xn, qkv)?;
            observe(i, MatmulInput::Attn, &a.xn)?;
            if let (Some(b_q), Some(b_k), Some(b_v)) = (&layer.b_q, &layer.b_k, &layer.b_v) {
                be.add_bias(&mut a.q, b_q)?;
                be.add_bias(&mut a.k, b_k)?;
                be.add_bias(&mut a.v, b_v)?;
            }
            match (&layer.q_norm, &layer.k_norm) {
                (Some(q_norm), Some(k_norm)) => {
                    be.rms_norm_rope(&mut a.q, q_norm, eps, &a.batch.pos, &at.rope, ff)?; // per head
                    be.rms_norm_rope(&mut a.k, k_norm, eps, &a.batch.pos, &at.rope, ff)?;
                    be.kv_write(&a.k, &a.v, &a.batch.slot, kv)?; // cache[slot[t]] = k[t], v[t]
                }
                // rope(q), rope(k), then cache[slot[t]] = k[t], v[t]
                _ => be.rope_kv_write(&mut a.q, &mut a.k, &a.v, &a.batch, &at.rope, ff, kv)?,
            }
            // att: [n_tokens, n_heads · head_dim]; xb = W_o · att: [n_tokens, d_model]
            be.attention_matmul(&a.q, kv, &a.batch, &shape, &mut a.att, &m.w_o, &mut a.xb)?;
            observe(i, MatmulInput::AttnOut, &a.att)?;
            let attn_out = post_norm(be, layer.post_attn_norm.as_ref(), eps, &a.xb, &mut a.xp)?;

            // Feed-forward block: x += [post_norm] W_down · (act(W_gate · xn) ⊙ W_up · xn)
            // x += attention's output; xn = norm(x); then gate, up of xn: [n_tokens, d_ff]
            let gate_up = &mut [(&m.w_gate, &mut a.gate), (&m.w_up, &mut a.up)];
            let y = attn_out.of(&a.xb, &a.xp);
            be.norm_matmuls(&mut a.x, Some(y), &layer.ffn_norm, eps, &mut a.xn, gate_up)?;
            observe(i, MatmulInput::Ffn, &a.xn)?;
            // hidden_ff = act(gate) ⊙ up: [n_tokens, d_ff]; xb = W_down · hidden_ff: [n_tokens, d_model]
            match c.activation {
                Activation::Silu => be.silu_mul_matmul(&a.gate, &a.up, &m.w_down, &mut a.hidden_ff, &mut a.xb)?,
                Activation::GeluTanh => {
                    be.gelu_mul(&a.gate, &a.up, &mut a.hidden_ff)?;
                    be.matmul(&a.hidden_ff, &m.w_down, &mut a.xb)?;
                }
            }
            observe(i, MatmulInput::FfnDown, &a.hidden_ff)?;
            w.end_layer(be, i, layers.len())?; // its slot may take the next streamed layer
            residual = Some(post_norm(be, layer.post_ffn_norm.as_ref(), eps, &a.xb, &mut a.xp)?);
        }
        if let Some(out) = residual {
            be.add_assign(&mut a.x, out.of(&a.xb, &a.xp))?; // the last layer's output
        }
        // Only the rows that need logits go through the (vocab-wide) output projection.
        be.gather_rows(&a.x, &a.logit_rows, &mut a.last)?; // last: [n_logits, d_model]
        be.rms_norm(&a.last, &w.output_norm, eps, &mut a.last_norm)?;
        be.matmul(&a.last_norm, w.lm_head(), &mut a.logits) // logits: [n_logits, vocab]
    }
}

/// Where a sublayer left its output: in xb, or in xp when a post-norm ran on it (Gemma 3).
#[derive(Clone, Copy)]
enum Out {
    Xb,
    Xp,
}

impl Out {
    fn of<'t, B: Backend>(self, xb: &'t Tensor<B>, xp: &'t Tensor<B>) -> &'t Tensor<B> {
        match self {
            Out::Xb => xb,
            Out::Xp => xp,
        }
    }
}

/// A sublayer's output xb, post-normed into xp when the model has that norm.
fn post_norm<B: Backend>(
    be: &B,
    norm: Option<&Tensor<B>>,
    eps: f32,
    xb: &Tensor<B>,
    xp: &mut Tensor<B>,
) -> Result<Out> {
    match norm {
        Some(gain) => {
            be.rms_norm(xb, gain, eps, xp)?; // xp: [n_tokens, d_model]
            Ok(Out::Xp)
        }
        None => Ok(Out::Xb),
    }
}
