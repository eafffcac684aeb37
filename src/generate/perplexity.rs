//! Perplexity computed the way llama.cpp's `llama-perplexity` does, so the figures compare:
//! non-overlapping chunks of `ctx` tokens, each from an empty cache; the logits at positions
//! ctx/2 … ctx-2 score the next token (ctx/2 - 1 tokens per chunk).

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::model::{Batch, Runner};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perplexity {
    pub ppl: f64,
    /// llama.cpp's ±: PPL · sqrt(var(NLL) / (count - 1)).
    pub stderr: f64,
    pub n_chunks: usize,
    pub tokens_scored: usize,
}

/// Scores `tokens` in chunks of `ctx`; `progress(chunk, running_ppl)` after each chunk.
pub fn perplexity<B: Backend>(
    runner: &mut Runner<B>,
    tokens: &[u32],
    ctx: usize,
    batch_size: usize,
    mut progress: impl FnMut(usize, f64),
) -> Result<Perplexity> {
    let n_chunks = tokens.len() / ctx.max(1);
    if ctx < 4 || n_chunks == 0 {
        return Err(Error::InvalidArgument(format!(
            "perplexity needs ctx ≥ 4 and at least ctx tokens ({} given)",
            tokens.len()
        )));
    }
    let first = ctx / 2;
    let (mut nll, mut nll2, mut count) = (0f64, 0f64, 0usize);
    for c in 0..n_chunks {
        let chunk = &tokens[c * ctx..(c + 1) * ctx];
        let seq = runner.cache.add_seq();
        for start in (0..ctx).step_by(batch_size.max(1)) {
            let end = (start + batch_size.max(1)).min(ctx);
            let mut batch = Batch::new();
            for (pos, &token) in chunk.iter().enumerate().take(end).skip(start) {
                batch.push(token, seq, pos, pos >= first && pos + 1 < ctx);
            }
            let result = runner.forward(&batch);
            if let Err(e) = result {
                runner.cache.remove_seq(seq)?;
                return Err(e);
            }
            for (row, pos) in (start..end).filter(|&p| p >= first && p + 1 < ctx).enumerate() {
                let lp = log_softmax_at(runner.logits(row), chunk[pos + 1] as usize);
                nll -= lp;
                nll2 += lp * lp;
                count += 1;
            }
        }
        runner.cache.remove_seq(seq)?;
        progress(c, (nll / count as f64).exp());
    }
    let mean = nll / count as f64;
    let var = (nll2 / count as f64 - mean * mean).max(0.0);
    let ppl = mean.exp();
    Ok(Perplexity { ppl, stderr: ppl * (var / (count as f64 - 1.0).max(1.0)).sqrt(), n_chunks, tokens_scored: count })
}

/// log p(target) under softmax(logits), in f64.
pub fn log_softmax_at(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    logits[target] as f64 - max - sum.ln()
}
