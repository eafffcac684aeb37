//! Prefill and decode throughput, measured the way llama-bench does (pp p, tg n): each run starts
//! from an empty cache, prefills `p` tokens in one batch, then decodes `n` tokens one at a time.
//! A warm-up run is not counted; the median of `runs` is reported with min and max.

use std::time::Instant;

use super::{Throughput, prompt_ids};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::model::{Batch, Runner};

#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub prefill_tok_s: Throughput,
    pub decode_tok_s: Throughput,
}

/// One run: (prefill tok/s, decode tok/s).
fn run_once<B: Backend>(runner: &mut Runner<B>, prompt: &[u32], n_gen: usize) -> Result<(f64, f64)> {
    let seq = runner.cache.add_seq();
    let t0 = Instant::now();
    let mut next = runner.forward_argmax(&Batch::sequence(seq, 0, prompt, false))?[0];
    let prefill = prompt.len() as f64 / t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    for i in 0..n_gen {
        next = runner.forward_argmax(&Batch::sequence(seq, prompt.len() + i, &[next], false))?[0];
    }
    let decode = n_gen as f64 / t1.elapsed().as_secs_f64();
    runner.cache.remove_seq(seq)?;
    Ok((prefill, decode))
}

/// Bytes of weights one decode step reads, the figure decode GB/s is quoted against: every tensor
/// but the token embedding, of which a step gathers one row, unless the model has no
/// `output.weight` (a tied head: the embedding is then the vocabulary projection, read whole).
/// The KV cache and the activations are not counted.
pub fn decode_weight_bytes(gguf: &Gguf) -> u64 {
    let tied = gguf.tensor("output.weight").is_none();
    gguf.tensors.iter().filter(|t| tied || t.name != "token_embd.weight").map(|t| t.n_bytes).sum()
}

pub fn bench<B: Backend>(runner: &mut Runner<B>, p: usize, n: usize, runs: usize) -> Result<BenchReport> {
    if p == 0 || p + n > runner.context {
        return Err(Error::InvalidArgument(format!("bench needs 0 < p and p + n ≤ context ({})", runner.context)));
    }
    let prompt = prompt_ids(p, runner.config().vocab_size, 0);
    run_once(runner, &prompt, n.min(8))?; // warm-up: first-touch of weights, shape allocations
    let (mut pre, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let (a, b) = run_once(runner, &prompt, n)?;
        pre.push(a);
        dec.push(b);
    }
    Ok(BenchReport {
        prompt_tokens: p,
        gen_tokens: n,
        prefill_tok_s: Throughput::from_runs(pre),
        decode_tok_s: Throughput::from_runs(dec),
    })
}

#[cfg(test)]
mod tests {
    use super::decode_weight_bytes;
    use crate::gguf::Gguf;

    fn tiny(name: &str) -> Gguf {
        Gguf::open(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny").join(name)).unwrap()
    }

    /// f32 values a step reads, from the shapes: per layer q, k, v, o, gate, up, down and the two
    /// norms (plus Qwen 3's q/k norms); then the final norm and one vocabulary × width head, which
    /// is `output.weight` (llama3-tiny) or the tied embedding (qwen3-tiny), never both.
    #[test]
    fn a_step_reads_every_layer_and_one_head() {
        let (d, ff, vocab, layers) = (64, 128, 275, 2);
        let layer = |q: usize, kv: usize, extra: usize| d * q + 2 * d * kv + q * d + 3 * d * ff + 2 * d + extra;
        let llama3 = layers * layer(64, 32, 0) + d + vocab * d + 8; // + rope_freqs [8]
        let qwen3 = layers * layer(128, 64, 2 * 32) + d + vocab * d;
        assert_eq!(decode_weight_bytes(&tiny("llama3-tiny.gguf")), 4 * llama3 as u64);
        assert_eq!(decode_weight_bytes(&tiny("qwen3-tiny.gguf")), 4 * qwen3 as u64);
    }
}
