//! The prefill/decode loop for one sequence: prompt in chunks, then one token per forward pass,
//! sampling each from the last logits, until an end-of-generation token or the token budget.

use crate::backend::{Backend, ready};
use crate::clock::Instant;
use crate::error::{Error, Result};
use crate::generate::rows::{Row, forward_and_sample_rows_async};
use crate::generate::sampler::Sampler;
use crate::kv_cache::SeqId;
use crate::model::{Batch, Runner};

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    /// Prompt tokens per forward pass during prefill (llama.cpp's n_batch).
    pub prefill_chunk: usize,
    /// Token ids that end generation (included in the output, like llama.cpp's stop token).
    pub eog: Vec<u32>,
}

/// What one generation produced, with its timings.
#[derive(Clone, Debug, Default)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub stopped_at_eog: bool,
    pub prefill_secs: f64,
    pub decode_secs: f64,
    pub n_prompt: usize,
    /// Prompt tokens whose keys and values came from the prefix cache instead of a prefill.
    pub cached_prompt_tokens: usize,
}

impl Generation {
    /// Prompt tokens computed (not taken from the prefix cache) per second.
    pub fn prefill_tok_s(&self) -> f64 {
        (self.n_prompt - self.cached_prompt_tokens) as f64 / self.prefill_secs.max(1e-9)
    }
    /// Decode speed: tokens after the first (which comes from the prefill's logits) per second.
    pub fn decode_tok_s(&self) -> f64 {
        self.tokens.len().saturating_sub(1) as f64 / self.decode_secs.max(1e-9)
    }
}

/// The next token after one forward pass of `batch` (one logits row), reading back as little as
/// the sampler allows: the device argmax for greedy, the device top-k candidates when they decide
/// the token (`Sampler::sample_top_k`), else the full row. The token is the same either way. The
/// scheduler's batches go through the same path (`rows::forward_and_sample_rows`).
pub fn forward_and_sample<B: Backend>(
    runner: &mut Runner<B>,
    batch: &Batch,
    sampler: &mut Sampler,
    history: &[u32],
) -> Result<u32> {
    ready(forward_and_sample_async(runner, batch, sampler, history))
}

/// `forward_and_sample`, awaiting the readback (see `Runner::forward_async`).
pub async fn forward_and_sample_async<B: Backend>(
    runner: &mut Runner<B>,
    batch: &Batch,
    sampler: &mut Sampler,
    history: &[u32],
) -> Result<u32> {
    let mut rows = [Row { sampler, history }];
    Ok(forward_and_sample_rows_async(runner, batch, &mut rows, false).await?[0])
}

/// Feeds `tokens` to `seq` in chunks; returns the logits of the last one.
pub fn prefill<B: Backend>(runner: &mut Runner<B>, seq: SeqId, tokens: &[u32], chunk: usize) -> Result<Vec<f32>> {
    ready(prefill_async(runner, seq, tokens, chunk))
}

/// `prefill`, awaiting the readback.
pub async fn prefill_async<B: Backend>(
    runner: &mut Runner<B>,
    seq: SeqId,
    tokens: &[u32],
    chunk: usize,
) -> Result<Vec<f32>> {
    if tokens.is_empty() {
        return Err(Error::InvalidArgument("the prompt is empty".into()));
    }
    let start = runner.cache.seq_len(seq)?;
    if start + tokens.len() > runner.context {
        return Err(Error::ContextOverflow { prompt: start + tokens.len(), context: runner.context });
    }
    let chunk = chunk.max(1);
    for (i, piece) in tokens.chunks(chunk).enumerate() {
        let is_last = (i + 1) * chunk >= tokens.len();
        let mut batch = Batch::sequence(seq, start + i * chunk, piece, false);
        if !is_last {
            batch.tokens.iter_mut().for_each(|t| t.logits = false);
        }
        runner.forward_async(&batch).await?;
    }
    Ok(runner.logits(0).to_vec())
}

/// Generates up to `max_tokens` tokens after `prompt`, calling `on_token` as each is chosen.
pub fn generate<B: Backend>(
    runner: &mut Runner<B>,
    seq: SeqId,
    prompt: &[u32],
    sampler: &mut Sampler,
    opts: &GenerateOptions,
    on_token: impl FnMut(u32) -> Result<()>,
) -> Result<Generation> {
    ready(generate_async(runner, seq, prompt, sampler, opts, on_token))
}

/// `generate`, awaiting each readback: the page's decode loop, where WebGPU results arrive in a
/// later turn of the event loop (and the page repaints between tokens).
pub async fn generate_async<B: Backend>(
    runner: &mut Runner<B>,
    seq: SeqId,
    prompt: &[u32],
    sampler: &mut Sampler,
    opts: &GenerateOptions,
    mut on_token: impl FnMut(u32) -> Result<()>,
) -> Result<Generation> {
    let mut out = Generation { n_prompt: prompt.len(), ..Generation::default() };
    let mut history: Vec<u32> = prompt.to_vec();
    let t0 = Instant::now();
    out.cached_prompt_tokens = runner.cache.reuse_prefix(seq, prompt)?;
    let logits = prefill_async(runner, seq, &prompt[out.cached_prompt_tokens..], opts.prefill_chunk).await?;
    let mut next = sampler.sample(&logits, &history);
    out.prefill_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    while out.tokens.len() < opts.max_tokens {
        out.tokens.push(next);
        history.push(next);
        on_token(next)?;
        if opts.eog.contains(&next) {
            out.stopped_at_eog = true;
            break;
        }
        let pos = runner.cache.seq_len(seq)?;
        if out.tokens.len() == opts.max_tokens || pos >= runner.context {
            break;
        }
        let batch = Batch::sequence(seq, pos, &[next], false);
        next = forward_and_sample_async(runner, &batch, sampler, &history).await?;
    }
    out.decode_secs = t1.elapsed().as_secs_f64();
    Ok(out)
}
