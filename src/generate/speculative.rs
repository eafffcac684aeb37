//! Speculative decoding of one sequence: a drafter proposes k tokens, the target scores the
//! pending token and all k drafts in one forward pass, and `verify` (verify.rs, shared with the
//! scheduler) keeps the longest acceptable prefix plus one token of its own: exactly plain greedy
//! decoding when greedy, the target's distribution when sampled. After a rejection both caches
//! are cut back to the accepted length (exact rollback).

use crate::backend::{Backend, ready};
use crate::clock::Instant;
use crate::error::Result;
use crate::generate::adaptive::{AdaptiveWindow, IN_STEP, Round, Step};
use crate::generate::decode::{GenerateOptions, Generation, forward_and_sample_async, prefill_async};
use crate::generate::drafter::{Draft, Drafter};
use crate::generate::sampler::Sampler;
use crate::generate::verify::{Scores, verify};
use crate::kv_cache::SeqId;
use crate::model::{Batch, Runner};

#[derive(Clone, Copy, Debug)]
pub struct SpecOptions {
    pub k: usize,
    pub adaptive: bool,
    pub k_max: usize,
}

/// Counts for `--json`: drafts proposed and accepted, and forward passes of each model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    pub drafted: u64,
    pub accepted: u64,
    /// Verification rounds (each one target forward pass).
    pub rounds: u64,
    pub draft_forward_passes: u64,
}

impl SpecStats {
    pub fn acceptance_rate(&self) -> f64 {
        self.accepted as f64 / (self.drafted.max(1)) as f64
    }
    /// Tokens emitted per verification round: accepted drafts plus the verifier's own token.
    pub fn mean_accepted_len(&self) -> f64 {
        (self.accepted + self.rounds) as f64 / self.rounds.max(1) as f64
    }
}

/// Like `generate`, with a drafter proposing `spec.k` tokens per target forward pass.
#[allow(clippy::too_many_arguments)] // `generate`'s six, plus the drafter and its options
pub fn generate_speculative<B: Backend>(
    runner: &mut Runner<B>,
    seq: SeqId,
    prompt: &[u32],
    sampler: &mut Sampler,
    opts: &GenerateOptions,
    drafter: &mut dyn Drafter,
    spec: SpecOptions,
    on_token: impl FnMut(u32) -> Result<()>,
) -> Result<(Generation, SpecStats)> {
    ready(generate_speculative_async(runner, seq, prompt, sampler, opts, drafter, spec, on_token))
}

/// `generate_speculative`, awaiting each readback (see `generate_async`).
#[allow(clippy::too_many_arguments)] // as generate_speculative
pub async fn generate_speculative_async<B: Backend>(
    runner: &mut Runner<B>,
    seq: SeqId,
    prompt: &[u32],
    sampler: &mut Sampler,
    opts: &GenerateOptions,
    drafter: &mut dyn Drafter,
    spec: SpecOptions,
    mut on_token: impl FnMut(u32) -> Result<()>,
) -> Result<(Generation, SpecStats)> {
    let mut out = Generation { n_prompt: prompt.len(), ..Generation::default() };
    let mut stats = SpecStats::default();
    let mut window = AdaptiveWindow::new(spec.k, spec.adaptive, spec.k_max);
    let mut context: Vec<u32> = prompt.to_vec(); // every accepted token; its last is not yet in the target cache
    let t0 = Instant::now();
    out.cached_prompt_tokens = runner.cache.reuse_prefix(seq, prompt)?;
    let logits = prefill_async(runner, seq, &prompt[out.cached_prompt_tokens..], opts.prefill_chunk).await?;
    let mut pending = vec![sampler.sample(&logits, &context)];
    out.prefill_secs = t0.elapsed().as_secs_f64();
    window.after_prefill(prompt.len() - out.cached_prompt_tokens, t0.elapsed());
    let t1 = Instant::now();
    'outer: loop {
        for &t in &pending {
            out.tokens.push(t);
            context.push(t);
            on_token(t)?;
            if opts.eog.contains(&t) {
                out.stopped_at_eog = true;
                break 'outer;
            }
            if out.tokens.len() >= opts.max_tokens {
                break 'outer;
            }
        }
        let start = runner.cache.seq_len(seq)?; // = context.len() - 1
        let room = runner.context.saturating_sub(start + 1);
        let remaining = opts.max_tokens - out.tokens.len();
        let behind = drafter.behind(&context)?;
        let k = match window.next(behind, remaining) {
            Step::Speculate(k) => k.min(room).min(remaining),
            Step::TimeDraft => {
                let timed = Instant::now();
                drafter.catch_up(&context, 1)?;
                window.after_draft_step(timed.elapsed());
                0
            }
            Step::Plain => 0,
        };
        // A draft model that missed tokens catches up in one batched pass, apart from drafting,
        // so the window sees what a drafted token costs.
        if k > 0 && behind > IN_STEP {
            drafter.catch_up(&context, behind - 1)?;
        }
        let drafting = Instant::now();
        let draft = if k > 0 { drafter.propose(&context, k)? } else { Draft { tokens: Vec::new(), probs: None } };
        let draft_time = drafting.elapsed();
        let last = *context.last().expect("context holds the prompt");
        let verifying = Instant::now();
        if draft.tokens.is_empty() {
            if start >= runner.context {
                break;
            }
            let batch = Batch::sequence(seq, start, &[last], false);
            let next = forward_and_sample_async(runner, &batch, sampler, &context).await?;
            drafter.rollback(context.len())?;
            window.after_plain_step(verifying.elapsed());
            pending = vec![next];
            continue;
        }
        let mut tokens = vec![last];
        tokens.extend_from_slice(&draft.tokens);
        runner.forward_async(&Batch::sequence(seq, start, &tokens, true)).await?;
        let mut history = context.clone();
        let scores = Scores::Logits((0..tokens.len()).map(|i| runner.logits(i)).collect());
        let (accepted, own) = verify(&scores, sampler, &draft, &mut history);
        // Keep the pending token and the accepted drafts; the verifier's own token is pending next.
        runner.cache.truncate(seq, start + 1 + accepted)?;
        drafter.rollback(context.len() + accepted)?;
        stats.drafted += draft.tokens.len() as u64;
        stats.accepted += accepted as u64;
        stats.rounds += 1;
        let drafted = draft.tokens.len();
        window.after_round(Round { drafted, accepted, draft: draft_time, verify: verifying.elapsed() });
        pending = draft.tokens[..accepted].to_vec();
        pending.push(own);
    }
    // The last round may have accepted drafts past the token budget or an end token: keep the
    // cache exactly as plain decoding leaves it (every emitted token but the last).
    let kept = (prompt.len() + out.tokens.len()).saturating_sub(1);
    runner.cache.truncate(seq, kept)?;
    drafter.rollback(kept)?;
    stats.draft_forward_passes = drafter.forward_passes();
    out.decode_secs = t1.elapsed().as_secs_f64();
    Ok((out, stats))
}
