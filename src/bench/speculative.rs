//! Speculative decoding against plain decoding, on real prompts: for each drafter and window k,
//! the acceptance rate, the mean tokens emitted per target forward pass, and the speedup of decode
//! time over plain greedy decoding of the same prompts, measured in the same run so both see the
//! same machine load. Greedy verification emits exactly the plain tokens, so both decode the
//! same text and their times compare directly; `matches_plain` checks that it held.
//!
//! Prompts are prefilled from a paged cache with prefix caching, so after the first run a
//! prompt's full pages are reused and the bench spends its time decoding. Prefill is not part
//! of the figures either way. A drafter is built fresh for every generation (its own cache and
//! counts start empty; a draft model is warmed up first, outside the clock), and its own prefill
//! of the prompt counts as decode time: it is a real cost of drafting with a model.

use std::sync::Arc;

use super::Throughput;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::generate::sampler::{Sampler, SamplerConfig};
use crate::generate::{
    Drafter, GenerateOptions, Generation, LookupDrafter, ModelDrafter, NgramDrafter, SpecOptions, SpecStats, generate,
    generate_speculative,
};
use crate::kv_cache::CacheLayout;
use crate::model::{Llama, Runner};

/// Tokens per page of the target's cache.
const PAGE: usize = 16;
/// Prompt tokens per forward pass, as `ultra generate` defaults.
const CHUNK: usize = 512;

/// Where drafts come from (as `ultra generate --draft-mode`).
pub enum DraftSource<B: Backend> {
    /// A separate model with the target's vocabulary.
    Model(Arc<Llama<B>>),
    /// The target's first `layers` layers and its head.
    SelfLayers(usize),
    /// The most frequent continuation seen so far (n = 3).
    Ngram,
    /// Prompt lookup (up to 3-token patterns).
    Lookup,
}

impl<B: Backend> DraftSource<B> {
    pub fn name(&self) -> &'static str {
        match self {
            DraftSource::Model(_) => "model",
            DraftSource::SelfLayers(_) => "self",
            DraftSource::Ngram => "ngram",
            DraftSource::Lookup => "lookup",
        }
    }

    fn drafter(&self, target: &Runner<B>, context: usize) -> Result<Box<dyn Drafter>> {
        let layout = CacheLayout::plain(1, context);
        Ok(match self {
            DraftSource::Model(model) => {
                let r = Runner::new(target.backend.clone(), model.clone(), layout, context)?;
                Box::new(ModelDrafter::new(r, None, CHUNK).warmed_up()?)
            }
            DraftSource::SelfLayers(depth) => {
                let r = Runner::with_depth(target.backend.clone(), target.model.clone(), layout, context, *depth)?;
                Box::new(ModelDrafter::new(r, None, CHUNK).warmed_up()?)
            }
            DraftSource::Ngram => Box::new(NgramDrafter::new(3)),
            DraftSource::Lookup => Box::new(LookupDrafter::new(3)),
        })
    }
}

/// A named prompt, as token ids.
#[derive(Clone, Debug)]
pub struct SpecPrompt {
    pub name: String,
    pub ids: Vec<u32>,
}

/// One prompt's figures for one drafter and k (acceptance is the same every run under greedy
/// decoding for model-free drafters; the speedup is the median over runs).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PromptFigures {
    pub name: String,
    pub acceptance_rate: f64,
    pub mean_accepted_len: f64,
    pub speedup: f64,
}

/// One drafter at one k, over all prompts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpecPoint {
    pub mode: &'static str,
    pub k: usize,
    /// Accepted / drafted over all prompts, per run.
    pub acceptance_rate: Throughput,
    /// Tokens emitted per verification pass over all prompts, per run.
    pub mean_accepted_len: Throughput,
    /// Plain decode seconds / speculative decode seconds over all prompts, per run.
    pub speedup: Throughput,
    pub decode_tok_s: Throughput,
    pub drafted: u64,
    pub accepted: u64,
    /// Every run emitted exactly the plain greedy tokens.
    pub matches_plain: bool,
    pub prompts: Vec<PromptFigures>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct SpecReport {
    /// Most tokens generated per prompt (fewer where the model ends its answer).
    pub gen_tokens: usize,
    pub prompts: Vec<String>,
    /// Plain greedy decode tok/s over all prompts, per run.
    pub plain_decode_tok_s: Throughput,
    pub points: Vec<SpecPoint>,
}

/// The target's cache and context for these prompts: every prompt's pages stay cached between
/// generations (so prefill is mostly skipped after the first run), plus room for one more.
pub fn target_layout(prompts: &[SpecPrompt], n: usize, k_max: usize) -> (CacheLayout, usize) {
    let longest = prompts.iter().map(|p| p.ids.len()).max().unwrap_or(0);
    let context = longest + n + k_max + 1;
    let pages: usize = prompts.iter().map(|p| (p.ids.len() + n + k_max + 1).div_ceil(PAGE)).sum();
    (CacheLayout::paged(PAGE, pages + context.div_ceil(PAGE)), context)
}

/// Per run and prompt: (decode seconds, tokens, stats).
type Runs = Vec<Vec<(f64, usize, SpecStats)>>;

/// Measures plain greedy decoding and every (drafter, k) on every prompt, `runs` times.
pub fn bench_speculative<B: Backend>(
    mut target: Runner<B>,
    prompts: &[SpecPrompt],
    n: usize,
    sources: &[DraftSource<B>],
    ks: &[usize],
    runs: usize,
    eog: &[u32],
) -> Result<SpecReport> {
    let longest = prompts.iter().map(|p| p.ids.len()).max().unwrap_or(0);
    let k_max = ks.iter().copied().max().unwrap_or(0);
    if prompts.iter().any(|p| p.ids.is_empty()) || n == 0 || ks.contains(&0) || longest + n + k_max + 1 > target.context
    {
        return Err(Error::InvalidArgument(format!(
            "speculative bench needs non-empty prompts, n > 0, k > 0 and prompt + n + k ≤ context ({})",
            target.context
        )));
    }
    let context = target.context;
    let opts = GenerateOptions { max_tokens: n, prefill_chunk: CHUNK, eog: eog.to_vec() };
    let greedy = || Sampler::new(SamplerConfig::default());
    // Warm-up: weights touched, decode and prefill shapes allocated.
    let seq = target.cache.add_seq();
    generate(
        &mut target,
        seq,
        &prompts[0].ids,
        &mut greedy()?,
        &GenerateOptions { max_tokens: n.min(8), ..opts.clone() },
        |_| Ok(()),
    )?;
    target.cache.remove_seq(seq)?;

    let configs: Vec<(usize, usize)> = (0..sources.len()).flat_map(|s| ks.iter().map(move |&k| (s, k))).collect();
    let mut plain: Runs = Vec::new();
    let mut spec: Vec<Runs> = vec![Vec::new(); configs.len()];
    let mut plain_tokens: Vec<Vec<u32>> = Vec::new();
    let mut matches = vec![true; configs.len()];
    for _ in 0..runs.max(1) {
        let mut this_run = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            let seq = target.cache.add_seq();
            let g = generate(&mut target, seq, &p.ids, &mut greedy()?, &opts, |_| Ok(()))?;
            target.cache.remove_seq(seq)?;
            this_run.push((g.decode_secs, g.tokens.len(), SpecStats::default()));
            if plain_tokens.len() <= i {
                plain_tokens.push(g.tokens);
            }
        }
        plain.push(this_run);
        for (c, &(s, k)) in configs.iter().enumerate() {
            let mut this_run = Vec::new();
            for (i, p) in prompts.iter().enumerate() {
                let mut drafter = sources[s].drafter(&target, context)?;
                let seq = target.cache.add_seq();
                let spec_opts = SpecOptions { k, adaptive: false, k_max: k };
                let (g, stats): (Generation, SpecStats) = generate_speculative(
                    &mut target,
                    seq,
                    &p.ids,
                    &mut greedy()?,
                    &opts,
                    drafter.as_mut(),
                    spec_opts,
                    |_| Ok(()),
                )?;
                target.cache.remove_seq(seq)?;
                matches[c] &= g.tokens == plain_tokens[i];
                this_run.push((g.decode_secs, g.tokens.len(), stats));
            }
            spec[c].push(this_run);
        }
    }
    let points = configs
        .iter()
        .zip(spec)
        .zip(matches)
        .map(|((&(s, k), runs), matches_plain)| point(sources[s].name(), k, prompts, &plain, &runs, matches_plain))
        .collect();
    Ok(SpecReport {
        gen_tokens: n,
        prompts: prompts.iter().map(|p| p.name.clone()).collect(),
        plain_decode_tok_s: Throughput::from_runs(plain.iter().map(|r| tok_s(r)).collect()),
        points,
    })
}

/// Decode tok/s of one run over all prompts (tokens after the first, as `Generation` counts).
fn tok_s(run: &[(f64, usize, SpecStats)]) -> f64 {
    let tokens: usize = run.iter().map(|r| r.1.saturating_sub(1)).sum();
    tokens as f64 / run.iter().map(|r| r.0).sum::<f64>().max(1e-9)
}

fn secs(run: &[(f64, usize, SpecStats)]) -> f64 {
    run.iter().map(|r| r.0).sum::<f64>().max(1e-9)
}

fn total(run: &[(f64, usize, SpecStats)]) -> SpecStats {
    run.iter().fold(SpecStats::default(), |a, r| SpecStats {
        drafted: a.drafted + r.2.drafted,
        accepted: a.accepted + r.2.accepted,
        rounds: a.rounds + r.2.rounds,
        draft_forward_passes: a.draft_forward_passes + r.2.draft_forward_passes,
    })
}

fn point(
    mode: &'static str,
    k: usize,
    prompts: &[SpecPrompt],
    plain: &Runs,
    spec: &Runs,
    matches_plain: bool,
) -> SpecPoint {
    let per_run = |f: &dyn Fn(usize) -> f64| Throughput::from_runs((0..spec.len()).map(f).collect());
    let last = total(spec.last().expect("at least one run"));
    let prompts = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let s = spec.last().expect("at least one run")[i].2;
            let speedup = per_run(&|r| plain[r][i].0 / spec[r][i].0.max(1e-9)).median;
            PromptFigures {
                name: p.name.clone(),
                acceptance_rate: s.acceptance_rate(),
                mean_accepted_len: s.mean_accepted_len(),
                speedup,
            }
        })
        .collect();
    SpecPoint {
        mode,
        k,
        acceptance_rate: per_run(&|r| total(&spec[r]).acceptance_rate()),
        mean_accepted_len: per_run(&|r| total(&spec[r]).mean_accepted_len()),
        speedup: per_run(&|r| secs(&plain[r]) / secs(&spec[r])),
        decode_tok_s: per_run(&|r| tok_s(&spec[r])),
        drafted: last.drafted,
        accepted: last.accepted,
        matches_plain,
        prompts,
    }
}
