//! The scheduler's streaming side on the reference model (CPU, batch-invariant): per-token events,
//! finish reasons, cancellation that frees pages at once, stop strings matched across token
//! boundaries and never emitted, and different sampler settings side by side in one batch.

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

const OPTS: SchedulerOptions = SchedulerOptions { max_seqs: 8, max_batch_tokens: 256, speculate: 0 };
const EOG: [u32; 2] = [0, 2];

fn model() -> SuiteModel<Cpu> {
    SuiteModel::load(Cpu::new(), true, true)
}

fn tokenizer() -> Tokenizer {
    Tokenizer::from_gguf(&Gguf::open(&common::model_path()).unwrap()).unwrap()
}

fn paged() -> CacheLayout {
    CacheLayout::paged(16, 8 * CONTEXT / 16)
}

fn greedy(index: usize, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request { index, prompt, max_tokens, sampler: Sampler::new(SamplerConfig::default()).unwrap() }
}

fn pieces(tok: &Tokenizer) -> Arc<Vec<Vec<u8>>> {
    Arc::new((0..tok.vocab_size() as u32).map(|id| if tok.is_eog(id) { vec![] } else { tok.decode(&[id]) }).collect())
}

/// Every event of a run to completion.
fn events(scheduler: &mut Scheduler<'_, Cpu>) -> Vec<Event> {
    let mut all = Vec::new();
    while !scheduler.is_done() {
        all.extend(scheduler.step_events().unwrap());
    }
    all
}

fn done(events: &[Event]) -> Vec<Completion> {
    let mut out: Vec<Completion> =
        events.iter().filter_map(|e| if let Event::Done(c) = e { Some(c.clone()) } else { None }).collect();
    out.sort_by_key(|c| c.index);
    out
}

#[test]
fn token_events_come_in_order_and_add_up_to_each_completion() {
    let m = model();
    let prompts = [m.prompt("pub_json"), m.prompt("pub_french"), m.prompt("pub_prose_whitespace")];
    let mut runner = m.runner(paged());
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), OPTS);
    for (i, p) in prompts.iter().enumerate() {
        scheduler.submit(greedy(i, p.clone(), 6 + 3 * i)).unwrap();
    }
    let all = events(&mut scheduler);
    for c in done(&all) {
        let streamed: Vec<u32> = all
            .iter()
            .filter_map(|e| match e {
                Event::Token { index, token, .. } if *index == c.index => Some(*token),
                _ => None,
            })
            .collect();
        assert_eq!(streamed, c.tokens, "request {}: streamed tokens", c.index);
        let last_token = all.iter().rposition(|e| matches!(e, Event::Token { index, .. } if *index == c.index));
        let done_at = all.iter().position(|e| matches!(e, Event::Done(d) if d.index == c.index));
        assert!(last_token < done_at, "request {}: Done after its last token", c.index);
        assert_eq!(c.tokens, m.solo(&prompts[c.index], 6 + 3 * c.index), "request {}: equals solo greedy", c.index);
        let reason =
            if c.tokens.last().is_some_and(|t| EOG.contains(t)) { FinishReason::Eog } else { FinishReason::Length };
        assert_eq!(c.finish, reason);
    }
    assert_eq!(scheduler.cache().blocks_in_use(), 0);
}

#[test]
fn cancelling_frees_pages_at_once_and_leaves_the_others_exact() {
    let m = model();
    let prompts = [m.prompt("pub_long_repetitive_400"), m.prompt("pub_json"), m.prompt("pub_french")];
    let mut runner = m.runner(paged());
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), SchedulerOptions { max_seqs: 2, ..OPTS });
    for (i, p) in prompts.iter().enumerate() {
        scheduler.submit(greedy(i, p.clone(), 8)).unwrap();
    }
    let mut seen = scheduler.step_events().unwrap();
    seen.extend(scheduler.step_events().unwrap());
    assert_eq!((scheduler.running(), scheduler.waiting()), (2, 1), "max_seqs 2: one request waits");
    let held = scheduler.cache().blocks_in_use();
    let cancelled = scheduler.cancel(0).unwrap().expect("request 0 is running");
    assert_eq!(cancelled.finish, FinishReason::Cancelled);
    assert!(scheduler.cache().blocks_in_use() < held, "its pages went back to the pool");
    assert!(scheduler.cancel(0).unwrap().is_none(), "a request ends once");
    seen.extend(events(&mut scheduler));
    let finished = done(&seen);
    assert_eq!(finished.iter().map(|c| c.index).collect::<Vec<_>>(), [1, 2]);
    for c in finished {
        assert_eq!(c.tokens, m.solo(&prompts[c.index], 8), "request {} after a cancel", c.index);
    }
    assert_eq!(scheduler.cache().blocks_in_use(), 0);

    // A waiting request cancels too.
    scheduler.submit(greedy(7, prompts[1].clone(), 4)).unwrap();
    assert_eq!(scheduler.cancel(7).unwrap().map(|c| (c.finish, c.tokens.len())), Some((FinishReason::Cancelled, 0)));
    assert!(scheduler.is_done());
}

#[test]
fn a_stop_string_across_tokens_ends_the_request_and_is_not_in_its_text() {
    let (m, tok) = (model(), tokenizer());
    let prompt = m.prompt("pub_french");
    let solo = m.solo(&prompt, 24);
    let texts: Vec<String> = solo.iter().map(|&t| tok.decode_lossy(&[t])).collect();
    // A stop string that starts inside token 3 and ends inside token 4 (their last and first bytes).
    let (a, b) = (&texts[3], &texts[4]);
    assert!(!a.is_empty() && !b.is_empty(), "tokens 3 and 4 have text: {texts:?}");
    let stop = format!("{}{}", a.chars().last().unwrap(), b.chars().next().unwrap());
    let full: String = texts.concat();
    let want = &full[..full.find(&stop).unwrap()];

    let mut runner = m.runner(paged());
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), OPTS);
    let text = TextStream::new(pieces(&tok), std::slice::from_ref(&stop)).unwrap();
    scheduler.submit_with(greedy(0, prompt, 24), Extras { text: Some(text), logprobs: Some(2) }).unwrap();
    let all = events(&mut scheduler);
    let c = done(&all).remove(0);
    assert_eq!(c.finish, FinishReason::StopString);
    assert_eq!(c.text, want, "text up to the stop string");
    let streamed: String =
        all.iter().filter_map(|e| if let Event::Token { text, .. } = e { Some(text.as_str()) } else { None }).collect();
    assert_eq!(streamed, want, "the streamed deltas never held the stop string");
    assert!(c.tokens.len() <= 5 && solo.starts_with(&c.tokens), "ended at the token completing it");
    for e in &all {
        if let Event::Token { logprobs: Some(lp), token, .. } = e {
            assert_eq!(lp.top.len(), 2);
            assert_eq!(lp.top[0].0, *token, "greedy picks the most likely token");
            assert!(lp.logprob <= 0.0);
        }
    }
    assert_eq!(scheduler.cache().blocks_in_use(), 0);
}

#[test]
fn different_sampler_settings_share_one_batch() {
    let m = model();
    let prompt = m.prompt("pub_json");
    let sampled = SamplerConfig { temperature: 0.8, top_k: 40, top_p: 0.9, seed: 11, ..SamplerConfig::default() };
    let penalized = SamplerConfig { frequency_penalty: 0.5, presence_penalty: 0.3, ..SamplerConfig::default() };
    let configs = [SamplerConfig::default(), sampled, penalized];
    let run = |configs: &[SamplerConfig]| -> Vec<Completion> {
        let mut runner = m.runner(paged());
        let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), OPTS);
        for (index, c) in configs.iter().enumerate() {
            let sampler = Sampler::new(c.clone()).unwrap();
            scheduler.submit(Request { index, prompt: prompt.clone(), max_tokens: 10, sampler }).unwrap();
        }
        done(&events(&mut scheduler))
    };
    let together = run(&configs);
    for (i, c) in configs.iter().enumerate() {
        let alone = run(std::slice::from_ref(c)).remove(0);
        assert_eq!(together[i].tokens, alone.tokens, "config {i} in a mixed batch equals it alone");
    }
    assert_ne!(together[0].tokens, together[1].tokens, "sampling differs from greedy here");
}

#[test]
fn a_prefix_shared_by_requests_arriving_together_is_prefilled_once() {
    let m = model();
    let base = m.prompt("pub_long_repetitive_400");
    let prompts = [base[..300].to_vec(), [&base[..200], &base[350..]].concat(), base[..250].to_vec()];
    let mut runner = m.runner(paged());
    let mut scheduler = Scheduler::new(&mut runner, EOG.to_vec(), OPTS);
    for (i, p) in prompts.iter().enumerate() {
        scheduler.submit(greedy(i, p.clone(), 6)).unwrap();
    }
    let finished = done(&events(&mut scheduler));
    assert_eq!(finished[0].cached_prompt_tokens, 0);
    assert_eq!(finished[1].cached_prompt_tokens, 192, "the 12 full pages of the 200 shared tokens");
    assert_eq!(finished[2].cached_prompt_tokens, 240, "15 full pages of the first prompt");
    for c in &finished {
        assert_eq!(c.tokens, m.solo(&prompts[c.index], 6), "request {} on shared pages", c.index);
    }
}
