//! Sampling from a row's best candidates (`Backend::top_k`: the k best token ids in rank order,
//! their logits and the row's log-sum-exp) instead of the whole row, so decoding reads back about
//! 2 KB instead of the full logits. The token is exactly the one `Sampler::sample` draws from the
//! full row, or there is none and the caller falls back to the full row.
//!
//! Why it is exact: with no repetition penalty every kept token is among the row's best, and the
//! chain's sums run over the kept set in a fixed order (`truncate` sorts the top-k set by rank), so
//! the candidates reproduce them bit for bit. Only top-p without top-k needs the whole row's
//! softmax sum; the device's log-sum-exp brackets it, and the nucleus is taken only where it ends
//! at the same token for every sum inside the bracket.

use crate::backend::MAX_TOP_K;

use super::{Sampler, SamplerConfig, pick, weight};
use crate::backend::sanitize;

impl Sampler {
    /// The k to ask `Backend::top_k` for, for rows of `vocab` logits, or None when this sampler
    /// needs the full row: greedy (the device argmax serves it), a repetition penalty (it moves
    /// tokens into the top from anywhere), top-k above MAX_TOP_K, or no truncation at all (every
    /// token can be drawn).
    pub fn top_k_request(&self, vocab: usize) -> Option<usize> {
        let c = &self.config;
        if c.is_greedy() || c.is_penalized() || vocab == 0 {
            return None;
        }
        match c.top_k {
            1..=MAX_TOP_K => Some(c.top_k.min(vocab)),
            0 if c.top_p < 1.0 || c.min_p > 0.0 => Some(MAX_TOP_K.min(vocab)),
            _ => None,
        }
    }

    /// The token `sample` would draw from the full row of `vocab` logits, from that row's
    /// `Backend::top_k` output: `ids` [k] and `vals` [k + 1], with k from `top_k_request`.
    /// None when the candidates cannot prove it (then call `sample` with the full row). Draws one
    /// random number exactly when it returns a token, as `sample` does.
    pub fn sample_top_k(&mut self, ids: &[u32], vals: &[f32], vocab: usize) -> Option<u32> {
        if self.top_k_request(vocab) != Some(ids.len()) || vals.len() != ids.len() + 1 {
            return None;
        }
        if ids.len() == vocab {
            return self.sample_dense(ids, vals);
        }
        if !self.truncate_candidates(ids, vals) {
            return None;
        }
        let u = self.rng.next_f64();
        self.softmax();
        Some(pick(self.candidates.iter().copied(), u))
    }

    /// Candidates that hold every token: rebuild the row and sample it as usual.
    fn sample_dense(&mut self, ids: &[u32], vals: &[f32]) -> Option<u32> {
        let mut dense = std::mem::take(&mut self.dense);
        dense.clear();
        dense.resize(ids.len(), f32::NEG_INFINITY);
        for (&id, &logit) in ids.iter().zip(vals) {
            *dense.get_mut(id as usize)? = logit;
        }
        let token = self.sample(&dense, &[]);
        self.dense = dense;
        Some(token)
    }

    /// Leaves in `candidates` what `truncate` leaves on the full row, in the same order; false
    /// when the candidates may not hold all of it.
    fn truncate_candidates(&mut self, ids: &[u32], vals: &[f32]) -> bool {
        let SamplerConfig { top_k, top_p, min_p, .. } = self.config;
        let k = ids.len();
        self.candidates.clear();
        self.candidates.extend(ids.iter().zip(vals).map(|(&id, &logit)| (id, sanitize(logit))));
        let (max, last) = (self.candidates[0].1, self.candidates[k - 1].1);
        if max == f32::NEG_INFINITY {
            return false; // Nothing has mass: rare, and left to the full row.
        }
        if top_k > 0 {
            // The full row's top-k set is exactly these tokens, sorted the same way.
            self.truncate();
            return true;
        }
        // Every token outside the candidates ranks at or below the last one.
        let floor = if min_p > 0.0 { max + min_p.ln() } else { f32::NEG_INFINITY }; // as in truncate
        let min_p_inside = last < floor;
        self.candidates.retain(|&(_, logit)| logit >= floor);
        if top_p < 1.0 {
            let Some(n) = nucleus_from_lse(&self.candidates, top_p, max, vals[k], min_p_inside) else {
                return false;
            };
            self.candidates.truncate(n); // a rank-order prefix, as nucleus_len leaves it
        } else {
            if !min_p_inside {
                return false;
            }
            // The full row keeps its min-p set in id order (retain does not reorder).
            self.candidates.sort_unstable_by_key(|&(id, _)| id);
        }
        true
    }
}

/// The length `nucleus_len` finds on the full row, from rank-ordered candidates alone, or None
/// if the candidates cannot prove it. Its target is top_p · z with z = Σ_row exp(logit − max),
/// known here as exp(lse − max) up to the device's error in `lse`; the prefix sums are the same
/// f64 sums in the same order. `complete`: the candidates hold every token that min-p keeps.
fn nucleus_from_lse(candidates: &[(u32, f32)], top_p: f32, max: f32, lse: f32, complete: bool) -> Option<usize> {
    // The op tests hold lse to 2e-5 + 1e-6·|lse| (tests/ops/cases.rs); allow 5× that, plus
    // f32 rounding of lse and max, and the f32 logit − max inside every weight (≤ 1e-6 relative).
    let error = 1e-4 + 8.0 * f64::from(f32::EPSILON) * (f64::from(lse.abs()) + f64::from(max.abs()));
    let z = (f64::from(lse) - f64::from(max)).exp();
    let (low, high) = (f64::from(top_p) * z * (-error).exp(), f64::from(top_p) * z * error.exp());
    if !(low.is_finite() && high.is_finite()) {
        return None;
    }
    let mut sum = 0.0;
    for (i, &(_, logit)) in candidates.iter().enumerate() {
        sum += weight(logit, max);
        if sum >= low {
            // Every sum before this one missed every possible target; this one must reach them all.
            return (sum >= high).then_some(i + 1);
        }
    }
    // Short of every possible target: the full row's nucleus ends past the candidates, unless
    // they are the whole min-p set, which nucleus_len then keeps whole.
    complete.then_some(candidates.len())
}

#[cfg(test)]
mod tests;
