//! Sampling every logits row of one batched forward pass, reading back as little as the rows
//! allow: the device argmax when every row is greedy, the device top-k candidates when every row
//! asks for the same k (`Sampler::top_k_request`), else the full logits. The tokens are the same
//! whichever way is taken. `decode::forward_and_sample` is this with one row: one readback path
//! for generate, speculative verification and the scheduler.

use crate::backend::{Backend, ready};
use crate::error::Result;
use crate::generate::sampler::Sampler;
use crate::model::{Batch, Runner};

/// Greedy without a penalty needs only the argmax, which the device computes, so
/// only the token id is read back.
pub fn uses_device_argmax(sampler: &Sampler) -> bool {
    sampler.config().is_greedy() && !sampler.config().is_penalized()
}

/// One logits row's sampler and the history its penalties look at.
pub struct Row<'a> {
    pub sampler: &'a mut Sampler,
    pub history: &'a [u32],
}

/// Runs `batch` and returns the next token of each row (in the batch's logits order). With
/// `full_logits` the whole rows are read back whatever the samplers need, so that
/// `runner.logits(i)` serves them afterwards (for log-probabilities).
pub fn forward_and_sample_rows<B: Backend>(
    runner: &mut Runner<B>,
    batch: &Batch,
    rows: &mut [Row<'_>],
    full_logits: bool,
) -> Result<Vec<u32>> {
    ready(forward_and_sample_rows_async(runner, batch, rows, full_logits))
}

/// `forward_and_sample_rows`, awaiting the readbacks (see `Runner::forward_async`).
pub async fn forward_and_sample_rows_async<B: Backend>(
    runner: &mut Runner<B>,
    batch: &Batch,
    rows: &mut [Row<'_>],
    full_logits: bool,
) -> Result<Vec<u32>> {
    if rows.is_empty() || full_logits {
        return sample_full(runner, batch, rows).await;
    }
    if rows.iter().all(|r| uses_device_argmax(r.sampler)) {
        return runner.forward_argmax_async(batch).await;
    }
    let vocab = runner.config().vocab_size;
    let k = rows[0].sampler.top_k_request(vocab);
    let Some(k) = k.filter(|_| rows.iter().all(|r| r.sampler.top_k_request(vocab) == k)) else {
        return sample_full(runner, batch, rows).await;
    };
    let top = runner.forward_top_k_async(batch, k).await?;
    let mut read = false;
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter_mut().enumerate() {
        let (ids, vals) = top.row(i);
        let token = match row.sampler.sample_top_k(ids, vals, vocab) {
            Some(token) => token,
            None => {
                if !read {
                    runner.read_logits_async().await?;
                    read = true;
                }
                row.sampler.sample(runner.logits(i), row.history)
            }
        };
        out.push(token);
    }
    Ok(out)
}

async fn sample_full<B: Backend>(runner: &mut Runner<B>, batch: &Batch, rows: &mut [Row<'_>]) -> Result<Vec<u32>> {
    runner.forward_async(batch).await?;
    Ok(rows.iter_mut().enumerate().map(|(i, r)| r.sampler.sample(runner.logits(i), r.history)).collect())
}

/// A chosen token's log-probability under the model (log-softmax of the raw logits) and the
/// `n` most likely tokens with theirs, best first (ties to the lower id).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
}

/// Log-probabilities of `token` and the top `n` of one row of logits.
pub fn logprobs(logits: &[f32], token: u32, n: usize) -> TokenLogprobs {
    let finite = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
    let max = logits.iter().copied().map(finite).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| ((finite(x) - max) as f64).exp()).sum();
    let lse = max + sum.ln() as f32;
    let lp = |id: u32| logits.get(id as usize).map_or(f32::NEG_INFINITY, |&x| finite(x) - lse);
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let by_rank = |a: &u32, b: &u32| lp(*b).total_cmp(&lp(*a)).then(a.cmp(b));
    let n = n.min(ids.len());
    if n > 0 && n < ids.len() {
        ids.select_nth_unstable_by(n - 1, by_rank);
    }
    ids.truncate(n);
    ids.sort_unstable_by(by_rank);
    TokenLogprobs { logprob: lp(token), top: ids.into_iter().map(|id| (id, lp(id))).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_a_log_softmax_with_the_best_first() {
        let lp = logprobs(&[0.0, 2.0, 1.0, 2.0], 2, 3);
        let z = (1.0f64 + 2.0 * 2f64.exp() + 1f64.exp()).ln();
        assert!((lp.logprob as f64 - (1.0 - z)).abs() < 1e-6);
        let ids: Vec<u32> = lp.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 3, 2], "ties go to the lower id");
        let total: f64 = [0.0, 2.0, 1.0, 2.0].iter().map(|&x| (x - z).exp()).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn logprobs_survive_nan_and_oversized_requests() {
        let lp = logprobs(&[f32::NAN, 0.0], 0, 10);
        assert_eq!(lp.logprob, f32::NEG_INFINITY);
        assert_eq!(lp.top.len(), 2);
        assert_eq!(lp.top[0], (1, 0.0));
    }
}
