//! Verification of drafted tokens, shared by single-sequence speculative decoding and the
//! batching scheduler: the target scored the pending token and k drafts in one forward pass
//! (k + 1 logits rows), and the verifier keeps the longest acceptable prefix plus one token of
//! its own. Greedy verification keeps drafts equal to the target's argmax, so the output is
//! exactly plain greedy decoding; sampled verification accepts draft x with probability
//! min(1, p(x)/q(x)) and otherwise samples norm(max(0, p - q)), so the output follows the
//! target's distribution (Leviathan et al. 2023, arXiv:2211.17192).

use crate::backend::Backend;
use crate::error::Result;
use crate::generate::drafter::Draft;
use crate::generate::rows::uses_device_argmax;
use crate::generate::sampler::Sampler;
use crate::model::{Batch, Runner};

/// The target's k + 1 rows for one sequence: row i scores the token after draft token i - 1.
pub enum Scores<'a> {
    /// Full logits rows ([vocab_size] each).
    Logits(Vec<&'a [f32]>),
    /// The device argmax of each row; only for samplers where `uses_device_argmax` holds.
    Argmax(&'a [u32]),
}

/// The verifier's decision for one round: (drafts accepted, the verifier's own next token).
/// `history` is every accepted token before the round; accepted drafts are pushed onto it.
pub fn verify(scores: &Scores<'_>, sampler: &mut Sampler, draft: &Draft, history: &mut Vec<u32>) -> (usize, u32) {
    let k = draft.tokens.len();
    let logits = match scores {
        Scores::Argmax(ids) => {
            // Greedy and unpenalized: the sampler's token is the row's argmax.
            let accepted = (0..k).take_while(|&i| ids[i] == draft.tokens[i]).count();
            history.extend_from_slice(&draft.tokens[..accepted]);
            return (accepted, ids[accepted]);
        }
        Scores::Logits(rows) => rows,
    };
    if sampler.config().is_greedy() {
        for (i, (row, &drafted)) in logits.iter().zip(&draft.tokens).enumerate() {
            let best = sampler.sample(row, history);
            if best != drafted {
                return (i, best);
            }
            history.push(best);
        }
        return (k, sampler.sample(logits[k], history));
    }
    let mut p = Vec::new();
    for i in 0..k {
        sampler.distribution(logits[i], history, &mut p);
        let x = draft.tokens[i] as usize;
        let q_x = draft.probs.as_ref().map_or(1.0, |q| q[i][x]);
        if sampler.uniform() * q_x < p[x] {
            history.push(x as u32);
            continue;
        }
        // Rejected: sample the residual max(0, p - q), renormalized by sample_from.
        match &draft.probs {
            Some(q) => p.iter_mut().zip(&q[i]).for_each(|(pi, qi)| *pi = (*pi - qi).max(0.0)),
            None => p[x] = 0.0,
        }
        return (i, sampler.sample_from(&p));
    }
    sampler.distribution(logits[k], history, &mut p);
    (k, sampler.sample_from(&p))
}

/// One sequence of a batch being verified: its sampler, its accepted tokens, its draft (empty:
/// a plain decode or the last prompt chunk, one logits row).
pub struct VerifyRow<'a> {
    pub sampler: &'a mut Sampler,
    pub history: &'a [u32],
    pub draft: &'a Draft,
}

/// Runs `batch`, whose logits rows are each sequence's 1 + draft rows in `rows` order, and
/// returns each sequence's tokens to emit: its accepted drafts, then its own token. Reads back
/// only the argmax ids when every sampler is greedy and unpenalized (and `full_logits` is off),
/// else the full logits, which then serve `runner.logits(i)` (log-probabilities).
pub fn forward_and_verify_rows<B: Backend>(
    runner: &mut Runner<B>,
    batch: &Batch,
    rows: &mut [VerifyRow<'_>],
    full_logits: bool,
) -> Result<Vec<Vec<u32>>> {
    let ids = if !full_logits && rows.iter().all(|r| uses_device_argmax(r.sampler)) {
        Some(runner.forward_argmax(batch)?)
    } else {
        runner.forward(batch)?;
        None
    };
    let mut out = Vec::with_capacity(rows.len());
    let mut row0 = 0;
    for r in rows.iter_mut() {
        let n = r.draft.tokens.len() + 1;
        let scores = match &ids {
            Some(ids) => Scores::Argmax(&ids[row0..row0 + n]),
            None => Scores::Logits((row0..row0 + n).map(|i| runner.logits(i)).collect()),
        };
        let emitted = match (&scores, r.draft.tokens.is_empty()) {
            // No draft: exactly the plain decoding draw (one random number when sampled).
            (Scores::Logits(l), true) => vec![r.sampler.sample(l[0], r.history)],
            _ => {
                let mut history = r.history.to_vec();
                let (accepted, own) = verify(&scores, r.sampler, r.draft, &mut history);
                let mut tokens = r.draft.tokens[..accepted].to_vec();
                tokens.push(own);
                tokens
            }
        };
        out.push(emitted);
        row0 += n;
    }
    Ok(out)
}
