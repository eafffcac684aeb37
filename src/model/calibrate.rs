//! GPTQ's calibration (`gptq`): the model run on a text on the CPU backend, with
//! `Runner::forward_observed` handing each layer's matmul inputs to an accumulator of Σ xᵀx per
//! input, which the matrices fed by that input share (q, k, v; gate, up).
//!
//! The bundled text ([`TEXT`], `calibration.txt`) is eleven short encyclopedia-style articles
//! (rivers, bread, printing, photosynthesis, lighthouses, volcanoes, chess, bees, telescopes,
//! glass, maps), written for this project and under its licence: general prose, unlike the
//! GPL-3 licence text the quality test and README's table evaluate on.

use std::collections::HashMap;

use crate::Cpu;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::gptq::Hessian;
use crate::kv_cache::CacheLayout;
use crate::model::{Batch, MatmulInput, Runner};
use crate::tokenizer::Tokenizer;

/// The bundled calibration text (module doc).
pub const TEXT: &str = include_str!("calibration.txt");

/// Σ xᵀx of every (layer, matmul input) over the calibration tokens.
pub struct Calibration {
    hessians: HashMap<(usize, MatmulInput), Hessian>,
    /// Tokens the model ran on.
    pub tokens: usize,
}

impl Calibration {
    /// The statistic of the input that feeds tensor `name` (`blk.I.attn_q.weight` …); None for
    /// the embeddings, the output matrix and vectors.
    pub fn for_tensor(&self, name: &str) -> Option<&Hessian> {
        let (layer, stem) = name.strip_prefix("blk.")?.strip_suffix(".weight")?.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let input = [MatmulInput::Attn, MatmulInput::AttnOut, MatmulInput::Ffn, MatmulInput::FfnDown]
            .into_iter()
            .find(|i| i.weights().contains(&stem))?;
        self.hessians.get(&(layer, input))
    }
}

/// The first `max_tokens` tokens of `text` as the model reads it, in chunks of `ctx` that each
/// start with BOS where the model asks for one (as `ultra perplexity` reads a file).
pub fn tokens(gguf: &Gguf, text: &str, max_tokens: usize, ctx: usize) -> Result<Vec<u32>> {
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    let mut tokens = tokenizer.encode_with_specials(text, false)?;
    tokens.truncate(max_tokens);
    if let Some(bos) = tokenizer.special_ids().bos.filter(|_| tokenizer.add_bos()) {
        for chunk in tokens.chunks_mut(ctx.max(1)) {
            chunk[0] = bos;
        }
    }
    if tokens.len() < 2 {
        return Err(Error::InvalidArgument(format!("calibration text gives {} tokens, need 2", tokens.len())));
    }
    Ok(tokens)
}

/// Runs the model of `gguf` on `tokens` on the CPU, in chunks of `ctx` each from an empty cache,
/// and accumulates Σ xᵀx of every matmul input; `progress(tokens)` after each chunk.
pub fn calibrate(gguf: &Gguf, tokens: &[u32], ctx: usize, mut progress: impl FnMut(usize)) -> Result<Calibration> {
    let ctx = ctx.max(1);
    let mut runner = Runner::load(Cpu::new(), gguf, CacheLayout::plain(1, ctx), ctx)?;
    let ctx = ctx.min(runner.context);
    let be = runner.backend.clone();
    let (mut hessians, mut host) = (HashMap::new(), Vec::new());
    for chunk in tokens.chunks(ctx) {
        let seq = runner.cache.add_seq();
        let mut batch = Batch::new();
        for (pos, &token) in chunk.iter().enumerate() {
            batch.push(token, seq, pos, pos + 1 == chunk.len());
        }
        let done = runner.forward_observed(&batch, &mut |layer, input, x| {
            host.resize(x.len(), 0.0);
            be.read_f32(x, &mut host)?;
            hessians.entry((layer, input)).or_insert_with(|| Hessian::new(x.cols)).add(&host)
        });
        runner.cache.remove_seq(seq)?;
        done?;
        progress(chunk.len());
    }
    Ok(Calibration { hessians, tokens: tokens.len() })
}
