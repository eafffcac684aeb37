//! Continuous batching: sequences join and leave the running batch at every step. Each step is
//! one forward pass holding one token of every decoding sequence plus prompt chunks of
//! sequences still in prefill. Admission waits for free KV pages; when pages run out the
//! youngest sequence is preempted (its pages freed) and recomputed later from its prompt and the
//! tokens it had produced, so it continues exactly as if it had never been preempted.
//!
//! `step_events` reports every token as it is sampled (with its text when the request carries a
//! `TextStream`), then each finished request with its reason. A request ends at an
//! end-of-generation token, its token budget, the context's end, a stop string, or `cancel`;
//! its pages go back to the pool at once.
//!
//! With `speculate` = K, each decoding sequence also carries up to K prompt-lookup draft tokens
//! in the same pass (K + 1 logits rows for it), checked by `verify` exactly as single-sequence
//! speculative decoding checks them; rejected positions are cut from its cache before the next
//! pass, and each accepted token is reported (and tested against the stop conditions) one by one.

use std::collections::VecDeque;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::generate::drafter::{Draft, Drafter, LookupDrafter};
pub use crate::generate::requests::{Completion, Event, Extras, FinishReason, Request};
use crate::generate::rows::{Row, forward_and_sample_rows, logprobs};
use crate::generate::sampler::Sampler;
use crate::generate::speculative::SpecStats;
use crate::generate::verify::{VerifyRow, forward_and_verify_rows};
use crate::kv_cache::SeqId;
use crate::model::{Batch, Runner};

struct Active {
    req: Request,
    seq: SeqId,
    /// The tokens whose keys and values the sequence needs: prompt, then generated ones.
    generated: Vec<u32>,
    /// Leading tokens of `needed()` already in the cache.
    computed: usize,
    admitted_at: u64,
    cached_prompt_tokens: Option<usize>,
    preemptions: usize,
    extras: Extras,
    /// Proposes draft tokens when the scheduler speculates.
    drafter: Option<Box<dyn Drafter>>,
    /// Tokens drafted after `needed()` for this step's pass (empty: a plain step).
    draft: Draft,
}

impl Active {
    /// Every token the sequence must hold in its cache before it can sample the next one:
    /// the prompt and everything generated so far (also its sampling history).
    fn needed(&self) -> Vec<u32> {
        let mut all = self.req.prompt.clone();
        all.extend_from_slice(&self.generated);
        all
    }
}

#[derive(Clone, Copy, Debug)]
pub struct SchedulerOptions {
    /// Most sequences in the running batch.
    pub max_seqs: usize,
    /// Most tokens in one forward pass (decode tokens plus prompt chunks).
    pub max_batch_tokens: usize,
    /// Prompt-lookup draft tokens per decoding sequence and pass; 0 decodes plainly.
    pub speculate: usize,
}

/// N-gram lengths the prompt-lookup drafter matches (as `ultra generate --draft-mode lookup`).
const LOOKUP_NGRAM: usize = 3;

pub struct Scheduler<'a, B: Backend> {
    runner: &'a mut Runner<B>,
    eog: Vec<u32>,
    opts: SchedulerOptions,
    waiting: VecDeque<Active>,
    running: Vec<Active>,
    clock: u64,
    /// Forward passes run by this scheduler.
    pub steps: u64,
    pub preemptions: u64,
    /// Drafted and accepted tokens, and verification rounds (sequence-passes with a draft).
    pub spec: SpecStats,
}

impl<'a, B: Backend> Scheduler<'a, B> {
    pub fn new(runner: &'a mut Runner<B>, eog: Vec<u32>, opts: SchedulerOptions) -> Self {
        Scheduler {
            runner,
            eog,
            opts,
            waiting: VecDeque::new(),
            running: Vec::new(),
            clock: 0,
            steps: 0,
            preemptions: 0,
            spec: SpecStats::default(),
        }
    }

    pub fn submit(&mut self, req: Request) -> Result<()> {
        self.submit_with(req, Extras::default())
    }

    /// Queues a request with its text stream and log-probability wishes.
    pub fn submit_with(&mut self, req: Request, extras: Extras) -> Result<()> {
        if req.prompt.is_empty() {
            return Err(Error::InvalidArgument(format!("prompt {} is empty", req.index)));
        }
        if req.prompt.len() >= self.runner.context {
            return Err(Error::ContextOverflow { prompt: req.prompt.len(), context: self.runner.context });
        }
        let waiting = Active {
            req,
            seq: usize::MAX,
            generated: Vec::new(),
            computed: 0,
            admitted_at: 0,
            cached_prompt_tokens: None,
            preemptions: 0,
            extras,
            drafter: (self.opts.speculate > 0).then(|| Box::new(LookupDrafter::new(LOOKUP_NGRAM)) as Box<dyn Drafter>),
            draft: no_draft(),
        };
        self.waiting.push_back(waiting);
        Ok(())
    }

    pub fn is_done(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Requests in the running batch.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Requests queued (new, or preempted for recompute).
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The KV cache the requests run on (for its page counts).
    pub fn cache(&self) -> &crate::kv_cache::KvCache<B> {
        &self.runner.cache
    }

    /// Ends request `index` now, running or waiting, and frees its pages. None if no such request.
    pub fn cancel(&mut self, index: usize) -> Result<Option<Completion>> {
        if let Some(i) = self.running.iter().position(|a| a.req.index == index) {
            let a = self.running.remove(i);
            self.runner.cache.remove_seq(a.seq)?;
            return Ok(Some(self.completion(a, FinishReason::Cancelled)));
        }
        match self.waiting.iter().position(|a| a.req.index == index) {
            Some(i) => {
                let a = self.waiting.remove(i).expect("position is in range");
                Ok(Some(self.completion(a, FinishReason::Cancelled)))
            }
            None => Ok(None),
        }
    }

    /// Runs until every request is complete, calling `on_done` as each finishes.
    pub fn run(&mut self, mut on_done: impl FnMut(Completion) -> Result<()>) -> Result<()> {
        while !self.is_done() {
            for c in self.step()? {
                on_done(c)?;
            }
        }
        Ok(())
    }

    /// Admits what fits, runs one forward pass over the running batch, samples, retires.
    pub fn step(&mut self) -> Result<Vec<Completion>> {
        let events = self.step_events()?;
        Ok(events.into_iter().filter_map(|e| if let Event::Done(c) = e { Some(c) } else { None }).collect())
    }

    /// One step, reporting each sampled token and then each request it finished.
    pub fn step_events(&mut self) -> Result<Vec<Event>> {
        self.admit()?;
        self.propose_drafts()?;
        let (batch, fed, rows) = self.build_batch()?;
        if batch.is_empty() {
            return Err(Error::Cache(
                "no sequence can make progress: the KV pool is too small for one prompt chunk".into(),
            ));
        }
        // Keep exactly the drafts the batch holds: the token budget or the free pages may have
        // cut them short.
        let mut in_batch = vec![0; self.running.len()];
        for &(i, n) in &fed {
            in_batch[i] = n;
        }
        for (a, &n) in self.running.iter_mut().zip(&in_batch) {
            let d = n.saturating_sub(a.needed().len() - a.computed);
            a.draft.tokens.truncate(d);
        }
        let emitted = self.forward_and_pick(&batch, &rows)?;
        self.steps += 1;
        for (i, n) in fed {
            self.running[i].computed += n;
        }
        let mut events = Vec::new();
        let mut stopped = Vec::new();
        let mut row0 = 0;
        for (&i, tokens) in rows.iter().zip(emitted) {
            let a = &mut self.running[i];
            let drafted = a.draft.tokens.len();
            if drafted > 0 {
                // Exact rollback: the cache keeps the fed token and the accepted drafts.
                let accepted = tokens.len() - 1;
                a.computed -= drafted - accepted;
                self.runner.cache.truncate(a.seq, a.computed)?;
                if let Some(d) = a.drafter.as_mut() {
                    d.rollback(a.computed)?;
                }
                self.spec.drafted += drafted as u64;
                self.spec.accepted += accepted as u64;
                self.spec.rounds += 1;
            }
            for (j, next) in tokens.into_iter().enumerate() {
                a.generated.push(next);
                let lp = a.extras.logprobs.map(|n| logprobs(self.runner.logits(row0 + j), next, n));
                let step = match &mut a.extras.text {
                    Some(t) if !self.eog.contains(&next) => t.push(next),
                    _ => Default::default(),
                };
                events.push(Event::Token { index: a.req.index, token: next, text: step.delta, logprobs: lp });
                // Tokens accepted past the request's end are dropped with its sequence.
                if step.stopped {
                    stopped.push(i);
                    break;
                }
                if finish_reason(a, &self.eog, self.runner.context, false).is_some() {
                    break;
                }
            }
            row0 += drafted + 1;
        }
        for i in (0..self.running.len()).rev() {
            if let Some(reason) = finish_reason(&self.running[i], &self.eog, self.runner.context, stopped.contains(&i))
            {
                let a = self.running.remove(i);
                self.runner.cache.remove_seq(a.seq)?;
                events.push(Event::Done(self.completion(a, reason)));
            }
        }
        Ok(events)
    }

    /// Runs the batch and returns, per logits-holding sequence of `rows`, the tokens it emits:
    /// one sampled token, or with a draft its accepted drafts and the verifier's own token.
    fn forward_and_pick(&mut self, batch: &Batch, rows: &[usize]) -> Result<Vec<Vec<u32>>> {
        let full_logits = rows.iter().any(|&i| self.running[i].extras.logprobs.is_some());
        let histories: Vec<Vec<u32>> = rows.iter().map(|&i| self.running[i].needed()).collect();
        if rows.iter().all(|&i| self.running[i].draft.tokens.is_empty()) {
            // A plain step: one row per sequence, read back as little as the samplers allow.
            let mut samplers: Vec<Option<&mut Sampler>> =
                self.running.iter_mut().map(|a| Some(&mut a.req.sampler)).collect();
            let mut sample_rows: Vec<Row<'_>> = rows
                .iter()
                .zip(&histories)
                .map(|(&i, history)| Row { sampler: samplers[i].take().expect("one logits row per sequence"), history })
                .collect();
            let tokens = forward_and_sample_rows(self.runner, batch, &mut sample_rows, full_logits)?;
            return Ok(tokens.into_iter().map(|t| vec![t]).collect());
        }
        let mut parts: Vec<Option<(&mut Sampler, &Draft)>> =
            self.running.iter_mut().map(|a| Some((&mut a.req.sampler, &a.draft))).collect();
        let mut verify_rows: Vec<VerifyRow<'_>> = rows
            .iter()
            .zip(&histories)
            .map(|(&i, history)| {
                let (sampler, draft) = parts[i].take().expect("one verification per sequence");
                VerifyRow { sampler, history, draft }
            })
            .collect();
        forward_and_verify_rows(self.runner, batch, &mut verify_rows, full_logits)
    }

    fn completion(&self, mut a: Active, finish: FinishReason) -> Completion {
        let text = match &mut a.extras.text {
            Some(t) => {
                t.finish();
                t.text().to_string()
            }
            None => String::new(),
        };
        Completion {
            index: a.req.index,
            prompt_tokens: a.req.prompt,
            tokens: a.generated,
            stopped_at_eog: finish == FinishReason::Eog,
            finish,
            text,
            cached_prompt_tokens: a.cached_prompt_tokens.unwrap_or(0),
            preemptions: a.preemptions,
            forward_passes: self.runner.forward_passes,
            pool: self.runner.cache.stats(),
            pages_in_use: self.runner.cache.blocks_in_use(),
        }
    }

    /// A draft for every sequence about to decode, within its token budget and the context:
    /// k drafts can emit k + 1 tokens, and those must fit both.
    fn propose_drafts(&mut self) -> Result<()> {
        let context = self.runner.context;
        for a in &mut self.running {
            a.draft = no_draft();
            let needed = a.needed();
            let Some(drafter) = a.drafter.as_mut() else { continue };
            if needed.len() - a.computed != 1 {
                continue; // still in prefill
            }
            let left = a.req.max_tokens.saturating_sub(a.generated.len() + 1);
            let k = self.opts.speculate.min(left).min(context.saturating_sub(needed.len() + 1));
            if k > 0 {
                a.draft = drafter.propose(&needed, k)?;
                a.draft.tokens.truncate(k);
            }
        }
        Ok(())
    }

    /// Moves waiting sequences into the batch while their first chunk fits in free pages,
    /// keeping one page of headroom per running sequence for its next decode token.
    fn admit(&mut self) -> Result<()> {
        while self.running.len() < self.opts.max_seqs {
            let Some(front) = self.waiting.front() else { break };
            if self.shares_pending_prefix(&front.needed()) {
                break;
            }
            let first_chunk = front.needed().len().min(self.opts.max_batch_tokens);
            let need = self.runner.cache.blocks_for(first_chunk) + self.running.len();
            if need > self.runner.cache.free_blocks() && !self.running.is_empty() {
                break;
            }
            let mut a = self.waiting.pop_front().expect("front exists");
            a.seq = self.runner.cache.add_seq();
            a.computed = self.runner.cache.reuse_prefix(a.seq, &a.needed())?;
            a.cached_prompt_tokens.get_or_insert(a.computed);
            self.clock += 1;
            a.admitted_at = self.clock;
            self.running.push(a);
        }
        Ok(())
    }

    /// Whether a running sequence is still computing full pages that `tokens` would share with
    /// it. Waiting for them lets the newcomer take those pages from the prefix cache instead of
    /// computing them again, so a system prompt that many requests share is prefilled once even
    /// when they arrive together. The running sequence gains `computed` every step, so the wait
    /// ends.
    fn shares_pending_prefix(&self, tokens: &[u32]) -> bool {
        let layout = self.runner.cache.layout;
        if !layout.prefix_caching || tokens.len() < 2 {
            return false;
        }
        let bs = layout.block_size;
        self.running.iter().any(|a| {
            let theirs = a.needed();
            let common = tokens.iter().zip(&theirs).take_while(|(x, y)| x == y).count();
            // reuse_prefix leaves the last prompt token to compute, so only pages before it count.
            let shared = common.min(tokens.len() - 1) / bs * bs;
            shared > 0 && a.computed < shared
        })
    }

    /// One token per decoding sequence, then prompt chunks within the token budget; preempts
    /// the youngest sequences until the batch's pages fit. Returns the batch, (sequence index in
    /// `running`, tokens fed) per sequence, and per logits row the index of its sequence.
    #[allow(clippy::type_complexity)] // the three parts of a plan, named in the doc above
    fn build_batch(&mut self) -> Result<(Batch, Vec<(usize, usize)>, Vec<usize>)> {
        loop {
            // Drafts are the first thing given up when pages are short, before any preemption.
            if self.running.iter().any(|a| !a.draft.tokens.is_empty()) {
                let plan = self.plan(true);
                if plan.3 <= self.runner.cache.free_blocks() {
                    return Ok((plan.0, plan.1, plan.2));
                }
            }
            let plan = self.plan(false);
            if plan.3 <= self.runner.cache.free_blocks() || self.running.len() <= 1 {
                return Ok((plan.0, plan.1, plan.2));
            }
            self.preempt_youngest()?;
        }
    }

    #[allow(clippy::type_complexity)]
    fn plan(&self, drafts: bool) -> (Batch, Vec<(usize, usize)>, Vec<usize>, usize) {
        let (mut batch, mut fed, mut rows, mut pages) = (Batch::new(), Vec::new(), Vec::new(), 0);
        let mut budget = self.opts.max_batch_tokens;
        // Decoding sequences first: they hold pages already and each needs one token.
        let mut order: Vec<usize> = (0..self.running.len()).collect();
        order.sort_by_key(|&i| {
            (self.running[i].needed().len() - self.running[i].computed > 1, self.running[i].admitted_at)
        });
        for i in order {
            let a = &self.running[i];
            let needed = a.needed();
            // What the cache lacks, then the draft; logits from the last needed token on.
            let mut feed = needed[a.computed..].to_vec();
            if drafts {
                feed.extend_from_slice(&a.draft.tokens);
            }
            let n = feed.len().min(budget);
            if n == 0 {
                continue;
            }
            budget -= n;
            fed.push((i, n));
            pages += self.runner.cache.blocks_needed(a.seq, n).unwrap_or(usize::MAX / 4);
            let last = needed.len() - a.computed - 1;
            for (j, &t) in feed[..n].iter().enumerate() {
                batch.push(t, a.seq, a.computed + j, j >= last);
            }
            if n > last {
                rows.push(i);
            }
        }
        (batch, fed, rows, pages)
    }

    /// Frees the pages of the most recently admitted sequence and queues it for recompute.
    fn preempt_youngest(&mut self) -> Result<()> {
        let i = (0..self.running.len()).max_by_key(|&i| self.running[i].admitted_at).expect("running is not empty");
        let mut a = self.running.remove(i);
        self.runner.cache.remove_seq(a.seq)?;
        a.computed = 0;
        a.draft = no_draft();
        a.preemptions += 1;
        self.preemptions += 1;
        self.waiting.push_front(a);
        Ok(())
    }
}

fn no_draft() -> Draft {
    Draft { tokens: Vec::new(), probs: None }
}

/// Why `a` ends now, if it does: checked after each token it emits.
fn finish_reason(a: &Active, eog: &[u32], context: usize, stopped: bool) -> Option<FinishReason> {
    if stopped {
        Some(FinishReason::StopString)
    } else if a.generated.last().is_some_and(|t| eog.contains(t)) {
        Some(FinishReason::Eog)
    } else if a.generated.len() >= a.req.max_tokens {
        Some(FinishReason::Length)
    } else if a.req.prompt.len() + a.generated.len() >= context {
        Some(FinishReason::Context)
    } else {
        None
    }
}
