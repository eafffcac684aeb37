//! Prompt-lookup speculation inside the batching scheduler, on the reference model (CPU,
//! batch-invariant): greedy outputs equal plain decoding token for token at K = 1 and 4, drafts
//! are accepted on a repetitive prompt, stop strings and token budgets still cut exactly, a
//! small page pool (drafts given up, then preemption) leaks nothing, and sampled verification
//! runs side by side with greedy rows.

mod common;

use std::sync::Arc;

use common::suite::{CONTEXT, SuiteModel};
use ultra::Cpu;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::stop::TextStream;
use ultra::generate::{Completion, Event, Extras, FinishReason, Request, Scheduler, SchedulerOptions};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::tokenizer::Tokenizer;

const EOG: [u32; 2] = [0, 2];
const PROMPTS: [&str; 4] = ["pub_long_repetitive_400", "pub_json", "pub_french", "pub_prose_whitespace"];

fn opts(speculate: usize) -> SchedulerOptions {
    SchedulerOptions { max_seqs: 8, max_batch_tokens: 256, speculate }
}

fn greedy(index: usize, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request { index, prompt, max_tokens, sampler: Sampler::new(SamplerConfig::default()).unwrap() }
}

/// Runs `requests` to completion; returns the completions by index and the streamed tokens.
fn run(
    m: &SuiteModel<Cpu>,
    layout: CacheLayout,
    opts: SchedulerOptions,
    requests: Vec<(Request, Extras)>,
) -> (Vec<Completion>, Vec<Event>, ultra::generate::SpecStats) {
    let mut runner = m.runner(layout);
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), opts);
    for (r, extras) in requests {
        scheduler.submit_with(r, extras).unwrap();
    }
    let mut all = Vec::new();
    while !scheduler.is_done() {
        all.extend(scheduler.step_events().unwrap());
    }
    assert_eq!(scheduler.cache().blocks_in_use(), 0, "every page back in the pool");
    scheduler.cache().check().unwrap();
    let mut done: Vec<Completion> =
        all.iter().filter_map(|e| if let Event::Done(c) = e { Some(c.clone()) } else { None }).collect();
    done.sort_by_key(|c| c.index);
    (done, all, scheduler.spec)
}

fn paged() -> CacheLayout {
    CacheLayout::paged(16, 8 * CONTEXT / 16)
}

fn streamed(all: &[Event], index: usize) -> Vec<u32> {
    all.iter()
        .filter_map(|e| match e {
            Event::Token { index: i, token, .. } if *i == index => Some(*token),
            _ => None,
        })
        .collect()
}

#[test]
fn greedy_speculation_equals_plain_decoding_token_for_token() {
    let m = SuiteModel::load(Cpu::new(), true, true);
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| m.prompt(p)).collect();
    let requests = || prompts.iter().enumerate().map(|(i, p)| (greedy(i, p.clone(), 20 + i), Extras::default()));
    let (plain, _, none) = run(&m, paged(), opts(0), requests().collect());
    assert_eq!(none.drafted, 0, "speculate 0 drafts nothing");
    for k in [1, 4] {
        let (spec, all, stats) = run(&m, paged(), opts(k), requests().collect());
        for (p, s) in plain.iter().zip(&spec) {
            assert_eq!(s.tokens, p.tokens, "K = {k}, request {}: speculative equals plain", s.index);
            assert_eq!(s.finish, p.finish, "K = {k}, request {}: finish reason", s.index);
            assert_eq!(streamed(&all, s.index), s.tokens, "K = {k}, request {}: every token streamed once", s.index);
        }
        assert!(stats.accepted > 0 && stats.accepted <= stats.drafted, "K = {k}: {stats:?}");
    }
    assert_eq!(plain[1].tokens, m.solo(&prompts[1], 21), "the plain batch equals solo greedy");
}

#[test]
fn drafts_are_accepted_on_a_repetitive_prompt_and_passes_are_saved() {
    let m = SuiteModel::load(Cpu::new(), true, true);
    let prompt = m.prompt("pub_long_repetitive_400");
    let solo = m.solo(&prompt, 32);
    let mut runner = m.runner(paged());
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), opts(4));
    scheduler.submit(greedy(0, prompt, 32)).unwrap();
    let mut tokens = Vec::new();
    while !scheduler.is_done() {
        for c in scheduler.step().unwrap() {
            tokens = c.tokens;
        }
    }
    assert_eq!(tokens, solo);
    let stats = scheduler.spec;
    assert!(stats.accepted > 0, "lookup drafts accepted on a repetitive prompt: {stats:?}");
    // One pass for the prompt, then one per round: accepted drafts save passes.
    assert!(scheduler.steps < 1 + tokens.len() as u64, "{} passes for {} tokens", scheduler.steps, tokens.len());
    assert_eq!(scheduler.cache().blocks_in_use(), 0);
}

#[test]
fn a_stop_string_cuts_exactly_with_speculation_on() {
    let m = SuiteModel::load(Cpu::new(), true, true);
    let tok = Tokenizer::from_gguf(&Gguf::open(&common::model_path()).unwrap()).unwrap();
    let pieces: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..tok.vocab_size() as u32).map(|id| if tok.is_eog(id) { vec![] } else { tok.decode(&[id]) }).collect(),
    );
    for name in ["pub_long_repetitive_400", "pub_french"] {
        let prompt = m.prompt(name);
        let solo = m.solo(&prompt, 24);
        let texts: Vec<String> = solo.iter().map(|&t| tok.decode_lossy(&[t])).collect();
        // Stop on token 6's text: with K = 4 it may sit inside an accepted run of drafts.
        let stop = texts[6].clone();
        assert!(!stop.is_empty(), "{name}: token 6 has text");
        let full: String = texts.concat();
        let want = &full[..full.find(&stop).unwrap()];
        let text = TextStream::new(pieces.clone(), std::slice::from_ref(&stop)).unwrap();
        let extras = Extras { text: Some(text), logprobs: Some(2) };
        let (done, all, _) = run(&m, paged(), opts(4), vec![(greedy(0, prompt, 24), extras)]);
        let c = &done[0];
        assert_eq!(c.finish, FinishReason::StopString, "{name}");
        assert_eq!(c.text, want, "{name}: text up to the stop string");
        let deltas: String = all
            .iter()
            .filter_map(|e| if let Event::Token { text, .. } = e { Some(text.as_str()) } else { None })
            .collect();
        assert_eq!(deltas, want, "{name}: streamed text");
        assert!(c.tokens.len() <= 7 && solo.starts_with(&c.tokens), "{name}: ended at the token completing it");
        for e in &all {
            if let Event::Token { logprobs: Some(lp), token, .. } = e {
                assert_eq!(lp.top[0].0, *token, "{name}: each token's own logits row");
            }
        }
    }
}

#[test]
fn max_tokens_and_a_small_pool_stay_exact_with_speculation() {
    let m = SuiteModel::load(Cpu::new(), true, true);
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| m.prompt(p)).collect();
    let requests = |lens: [usize; 4]| -> Vec<(Request, Extras)> {
        prompts.iter().zip(lens).enumerate().map(|(i, (p, n))| (greedy(i, p.clone(), n), Extras::default())).collect()
    };
    // Budgets of 1 and 2 tokens leave no room for drafts; 7 and 13 cut a round short.
    let lens = [13, 1, 2, 7];
    let (plain, _, _) = run(&m, paged(), opts(0), requests(lens));
    let (spec, _, _) = run(&m, paged(), opts(4), requests(lens));
    for ((p, s), n) in plain.iter().zip(&spec).zip(lens) {
        assert_eq!(s.tokens, p.tokens, "request {}: max_tokens {n}", s.index);
        assert!(s.tokens.len() <= n);
    }
    // 32 pages of 16 cannot hold the four prompts and their outputs at once: drafts are given up
    // and sequences preempted, and each still equals its plain output.
    let big = [12; 4];
    let (plain, _, _) = run(&m, paged(), opts(0), requests(big));
    let wide = SchedulerOptions { max_batch_tokens: 512, ..opts(4) };
    let (spec, _, _) = run(&m, CacheLayout::paged(16, 32), wide, requests(big));
    for (p, s) in plain.iter().zip(&spec) {
        assert_eq!(s.tokens, p.tokens, "request {} (preempted {} times)", s.index, s.preemptions);
    }
    assert!(spec.iter().any(|c| c.preemptions > 0), "the small pool preempted");
}

#[test]
fn sampled_verification_shares_a_batch_with_greedy_rows() {
    let m = SuiteModel::load(Cpu::new(), true, true);
    let prompt = m.prompt("pub_long_repetitive_400");
    let sampled = SamplerConfig { temperature: 0.7, top_k: 40, seed: 5, ..SamplerConfig::default() };
    let penalized = SamplerConfig { repeat_penalty: 1.1, ..SamplerConfig::default() };
    let configs = [SamplerConfig::default(), sampled, penalized];
    let requests = |configs: &[SamplerConfig]| -> Vec<(Request, Extras)> {
        let sampler = |c: &SamplerConfig| Sampler::new(c.clone()).unwrap();
        let r = |i, c| Request { index: i, prompt: prompt.clone(), max_tokens: 16, sampler: sampler(c) };
        configs.iter().enumerate().map(|(i, c)| (r(i, c), Extras::default())).collect()
    };
    let (plain, _, _) = run(&m, paged(), opts(0), requests(&configs));
    let (spec, _, stats) = run(&m, paged(), opts(4), requests(&configs));
    assert_eq!(spec[0].tokens, plain[0].tokens, "greedy row");
    assert_eq!(spec[2].tokens, plain[2].tokens, "penalized greedy row (full logits)");
    let c = &spec[1];
    assert!(c.tokens.len() == 16 || c.finish == FinishReason::Eog, "the sampled row ran to its end: {c:?}");
    assert!(stats.rounds > 0);
}
