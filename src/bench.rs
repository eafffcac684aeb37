//! Prefill and decode throughput, measured the way llama-bench does (pp p, tg n): each run starts
//! from an empty cache, prefills `p` tokens in one batch, then decodes `n` tokens one at a time.
//! A warm-up run is not counted; the median of `runs` is reported with min and max.

use std::time::Instant;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::model::{Batch, Runner};

/// tok/s over several runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Throughput {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<f64>,
}

impl Throughput {
    pub fn from_runs(mut runs: Vec<f64>) -> Throughput {
        runs.sort_by(f64::total_cmp);
        let n = runs.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            runs[n / 2]
        } else {
            (runs[n / 2 - 1] + runs[n / 2]) / 2.0
        };
        Throughput { median, min: runs.first().copied().unwrap_or(0.0), max: runs.last().copied().unwrap_or(0.0), runs }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub prefill_tok_s: Throughput,
    pub decode_tok_s: Throughput,
}

/// Deterministic pseudo-random prompt ids (what they are does not change the work done).
fn prompt_ids(n: usize, vocab: usize) -> Vec<u32> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % vocab as u64) as u32
        })
        .collect()
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
    let prompt = prompt_ids(p, runner.config().vocab_size);
    run_once(runner, &prompt, n.min(8))?; // warm-up: first-touch of weights, shape allocations
    let (mut pre, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let (a, b) = run_once(runner, &prompt, n)?;
        pre.push(a);
        dec.push(b);
    }
    Ok(BenchReport { prompt_tokens: p, gen_tokens: n, prefill_tok_s: Throughput::from_runs(pre), decode_tok_s: Throughput::from_runs(dec) })
}
