//! Batched decoding throughput: B sequences, each prefilled with its own p-token prompt, then
//! decoded together — every step is one forward pass holding one token of each sequence — for
//! n steps. The figure is aggregate decode tok/s (B · n / seconds), the number continuous
//! batching buys on a server.
//!
//! The prompts are prefilled once, for the largest B; each run of each B decodes the first B
//! sequences from position p and then cuts their caches back to p. Prefill would otherwise
//! dominate the bench (Σ B · p tokens per run) without changing what decoding costs. Each run
//! measures every B in turn, so slow drifts in machine load affect all batch sizes alike.

use std::time::Instant;

use super::{Throughput, prompt_ids};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kv_cache::SeqId;
use crate::model::{Batch, Runner};

/// One batch size's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BatchPoint {
    pub batch: usize,
    /// Aggregate decode tok/s over all B sequences.
    pub decode_tok_s: Throughput,
    /// Aggregate tok/s divided by B = 1's median (1.0 when B = 1 is not in the list).
    pub speedup_vs_b1: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct BatchReport {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub points: Vec<BatchPoint>,
}

/// n decode steps of `seqs` together, from their current ends; returns seconds.
fn decode_together<B: Backend>(
    runner: &mut Runner<B>,
    seqs: &[SeqId],
    first: &[u32],
    p: usize,
    n: usize,
) -> Result<f64> {
    let mut next = first.to_vec();
    let t0 = Instant::now();
    for step in 0..n {
        let mut batch = Batch::new();
        for (&s, &t) in seqs.iter().zip(&next) {
            batch.push(t, s, p + step, true);
        }
        next = runner.forward_argmax(&batch)?;
    }
    let secs = t0.elapsed().as_secs_f64();
    for &s in seqs {
        runner.cache.truncate(s, p)?;
    }
    Ok(secs)
}

/// The runner's cache must hold `max(batches)` sequences of `p + n` tokens.
pub fn bench_batch<B: Backend>(
    runner: &mut Runner<B>,
    p: usize,
    n: usize,
    batches: &[usize],
    runs: usize,
) -> Result<BatchReport> {
    let max_b = batches.iter().copied().max().unwrap_or(0);
    if p == 0 || n == 0 || max_b == 0 || batches.contains(&0) || p + n > runner.context {
        return Err(Error::InvalidArgument(format!(
            "batch bench needs p > 0, n > 0, batch sizes > 0 and p + n ≤ context ({})",
            runner.context
        )));
    }
    let vocab = runner.config().vocab_size;
    let (mut seqs, mut first) = (Vec::new(), Vec::new());
    for i in 0..max_b {
        let seq = runner.cache.add_seq();
        let prompt = prompt_ids(p, vocab, i as u64 + 1);
        first.push(runner.forward_argmax(&Batch::sequence(seq, 0, &prompt, false))?[0]);
        seqs.push(seq);
    }
    for &b in batches {
        decode_together(runner, &seqs[..b], &first[..b], p, n.min(4))?; // warm-up: this shape's activations
    }
    // Runs outside, batch sizes inside: a change in machine load during the bench then spreads
    // over every B instead of skewing the ratios between them.
    let mut tok_s = vec![Vec::new(); batches.len()];
    for _ in 0..runs.max(1) {
        for (i, &b) in batches.iter().enumerate() {
            let secs = decode_together(runner, &seqs[..b], &first[..b], p, n)?;
            tok_s[i].push((b * n) as f64 / secs);
        }
    }
    let mut points: Vec<BatchPoint> = batches
        .iter()
        .zip(tok_s)
        .map(|(&batch, runs)| BatchPoint { batch, decode_tok_s: Throughput::from_runs(runs), speedup_vs_b1: 0.0 })
        .collect();
    let base = points.iter().find(|pt| pt.batch == 1).map(|pt| pt.decode_tok_s.median);
    for pt in &mut points {
        pt.speedup_vs_b1 = base.map_or(1.0, |b1| pt.decode_tok_s.median / b1);
    }
    for s in seqs {
        runner.cache.remove_seq(s)?;
    }
    Ok(BatchReport { prompt_tokens: p, gen_tokens: n, points })
}

/// Aggregate decode tok/s (median, with a min–max bar) against B on a log₂ axis, each point labelled.
pub fn svg(r: &BatchReport, title: &str) -> String {
    let (w, h, m) = (560.0, 300.0, 56.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" \
         font-size=\"11\">\n<text x=\"10\" y=\"16\" font-size=\"13\">{}</text>\n",
        h + 40.0,
        super::offload::escape(title)
    );
    let log_b = |b: usize| (b.max(1) as f64).log2();
    let x_max = r.points.iter().map(|p| log_b(p.batch)).fold(1.0, f64::max);
    let y_max = r.points.iter().map(|p| p.decode_tok_s.max).fold(1e-9, f64::max) * 1.15;
    let px = |b: usize| m + (w - 1.5 * m) * log_b(b) / x_max;
    let py = |v: f64| 30.0 + (h - m) * (1.0 - v / y_max);
    out += &format!(
        "<line x1=\"{m}\" y1=\"{b}\" x2=\"{m}\" y2=\"30\" stroke=\"#000\"/>\n\
         <line x1=\"{m}\" y1=\"{b}\" x2=\"{}\" y2=\"{b}\" stroke=\"#000\"/>\n\
         <text x=\"{}\" y=\"{}\">sequences decoded together (B)</text>\n\
         <text x=\"4\" y=\"38\">{y_max:.0}</text>\n<text x=\"4\" y=\"52\">tok/s</text>\n",
        w - 0.5 * m,
        w / 2.0 - 80.0,
        h + 24.0,
        b = py(0.0),
    );
    let mut pts: Vec<&BatchPoint> = r.points.iter().collect();
    pts.sort_by_key(|p| p.batch);
    let line: Vec<String> =
        pts.iter().map(|p| format!("{:.1},{:.1}", px(p.batch), py(p.decode_tok_s.median))).collect();
    out += &format!("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>\n", line.join(" "));
    for p in pts {
        let (x, t) = (px(p.batch), &p.decode_tok_s);
        out += &format!(
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#1f77b4\"/>\n\
             <circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#1f77b4\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{:.0}</text>\n<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            py(t.min),
            py(t.max),
            py(t.median),
            x - 12.0,
            py(t.median) - 8.0,
            t.median,
            x - 6.0,
            py(0.0) + 14.0,
            p.batch
        );
    }
    out + "</svg>\n"
}
