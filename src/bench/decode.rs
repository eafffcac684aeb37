//! Prefill and decode throughput, measured the way llama-bench does (pp p, tg n): each run starts
//! from an empty cache, prefills `p` tokens in one batch, then decodes `n` tokens one at a time.
//! A warm-up run is not counted; the median of `runs` is reported with min and max.

use std::time::Instant;

use super::{Throughput, prompt_ids};
use crate::backend::Backend;
use crate::error::{Error, Result};
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
