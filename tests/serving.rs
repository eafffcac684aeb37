//! Batched decoding, the paged cache, prefix sharing and preemption on the reference model:
//! each is an addressing or scheduling change, never an approximation, so every output must equal
//! the prompt run alone with a plain cache, token for token.

mod common;

use serde_json::Value;
use ultra::Cpu;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{Completion, GenerateOptions, Request, Scheduler, SchedulerOptions, generate};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;

const MAX_TOKENS: usize = 12;
const CONTEXT: usize = 1024;

fn prompts() -> Vec<Vec<u32>> {
    let refs = common::load_json("smollm2/greedy.json");
    let all = refs["prompts"].as_array().unwrap().clone();
    // Different lengths (23 to 405 tokens), so prefill chunks and decodes mix in one batch.
    ["pub_prose_whitespace", "pub_json", "pub_long_repetitive_400", "pub_french"]
        .iter()
        .map(|name| {
            let case: &Value = all.iter().find(|c| c["name"] == *name).unwrap();
            case["prompt_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
        })
        .collect()
}

fn runner(layout: CacheLayout) -> Runner<Cpu> {
    let gguf = Gguf::open(&common::model_path()).unwrap();
    Runner::load(Cpu::new(), &gguf, layout, CONTEXT).unwrap()
}

/// Each prompt alone, greedy, plain cache.
fn solo(prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let mut runner = runner(CacheLayout::plain(1, CONTEXT));
    prompts
        .iter()
        .map(|p| {
            let seq = runner.cache.add_seq();
            let opts = GenerateOptions { max_tokens: MAX_TOKENS, prefill_chunk: 512, eog: vec![0, 2] };
            let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
            let out = generate(&mut runner, seq, p, &mut sampler, &opts, |_| Ok(())).unwrap();
            runner.cache.remove_seq(seq).unwrap();
            out.tokens
        })
        .collect()
}

fn batched(runner: &mut Runner<Cpu>, prompts: &[Vec<u32>], opts: SchedulerOptions) -> (Vec<Completion>, u64, u64) {
    let mut scheduler = Scheduler::new(runner, vec![0, 2], opts);
    for (index, p) in prompts.iter().enumerate() {
        let sampler = Sampler::new(SamplerConfig::default()).unwrap();
        scheduler.submit(Request { index, prompt: p.clone(), max_tokens: MAX_TOKENS, sampler }).unwrap();
    }
    let mut done = Vec::new();
    scheduler.run(|c| Ok(done.push(c))).unwrap();
    let (steps, preemptions) = (scheduler.steps, scheduler.preemptions);
    done.sort_by_key(|c| c.index);
    (done, steps, preemptions)
}

#[test]
fn batched_greedy_equals_each_prompt_alone_with_one_forward_pass_per_step() {
    let prompts = prompts();
    let expected = solo(&prompts);
    for layout in [CacheLayout::plain(4, CONTEXT), CacheLayout::paged(16, 4 * CONTEXT / 16)] {
        let mut runner = runner(layout);
        let opts = SchedulerOptions { max_seqs: 4, max_batch_tokens: 512 };
        let (done, steps, _) = batched(&mut runner, &prompts, opts);
        for (c, want) in done.iter().zip(&expected) {
            assert_eq!(&c.tokens, want, "prompt {} ({layout:?}) differs from its solo run", c.index);
        }
        assert_eq!(runner.forward_passes, steps, "one forward pass per scheduler step");
        let generated: usize = done.iter().map(|c| c.tokens.len()).sum();
        assert!((steps as usize) < generated / 2, "{steps} steps for {generated} tokens: sequences were not batched");
        assert_eq!(runner.cache.blocks_in_use(), 0, "pages leaked");
    }
}

#[test]
fn a_shared_prefix_is_not_recomputed_and_changes_nothing() {
    let base = prompts()[2].clone(); // 405 tokens
    let (a, b) = (base[..300].to_vec(), [&base[..200], &base[350..]].concat());
    let expected = solo(&[a.clone(), b.clone()]);
    let mut runner = runner(CacheLayout::paged(16, 128));
    // One sequence at a time, so the second prompt finds the first one's pages cached.
    let (done, _, _) = batched(&mut runner, &[a, b], SchedulerOptions { max_seqs: 1, max_batch_tokens: 512 });
    assert_eq!(done[0].tokens, expected[0]);
    assert_eq!(done[1].tokens, expected[1]);
    assert_eq!(done[0].cached_prompt_tokens, 0);
    assert_eq!(done[1].cached_prompt_tokens, 192, "the 12 full pages of the 200 shared tokens are reused");
    assert!(runner.cache.stats().prefix_hits >= 12);
}

#[test]
fn a_preempted_sequence_continues_exactly_as_if_it_had_never_been() {
    let prompts = prompts();
    let expected = solo(&prompts);
    // The four prompts with their 12 new tokens need 3 + 3 + 27 + 3 pages of 16; the pool has 32.
    let mut runner = runner(CacheLayout::paged(16, 32));
    let (done, _, preemptions) =
        batched(&mut runner, &prompts, SchedulerOptions { max_seqs: 4, max_batch_tokens: 512 });
    assert!(preemptions > 0, "the pool was meant to run out");
    for (c, want) in done.iter().zip(&expected) {
        assert_eq!(&c.tokens, want, "prompt {} (preempted {} times) differs from its solo run", c.index, c.preemptions);
    }
    assert_eq!(runner.cache.blocks_in_use(), 0);
}
