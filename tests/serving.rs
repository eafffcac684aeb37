//! Batched decoding, the paged cache, prefix sharing and preemption, on every backend: each is an
//! addressing or scheduling change, never an approximation, so every output must equal the
//! prompt run alone with a plain cache (bit for bit on batch-invariant backends; elsewhere up to
//! the first near-tie). GPU suites skip loudly without a device.

mod common;

use common::suite::{CONTEXT, SuiteModel};
use ultra::Backend;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{Completion, Request, Scheduler, SchedulerOptions};
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;

const MAX_TOKENS: usize = 12;

/// Different lengths (23 to 405 tokens), so prefill chunks and decodes mix in one batch.
fn prompts<B: Backend>(m: &SuiteModel<B>) -> Vec<Vec<u32>> {
    ["pub_prose_whitespace", "pub_json", "pub_long_repetitive_400", "pub_french"].iter().map(|n| m.prompt(n)).collect()
}

fn batched<B: Backend>(
    runner: &mut Runner<B>,
    prompts: &[Vec<u32>],
    opts: SchedulerOptions,
) -> (Vec<Completion>, u64, u64) {
    let mut scheduler = Scheduler::new(runner, vec![0, 2], opts);
    for (index, p) in prompts.iter().enumerate() {
        let sampler = Sampler::new(SamplerConfig::default()).unwrap();
        scheduler.submit(Request { index, prompt: p.clone(), max_tokens: MAX_TOKENS, sampler }).unwrap();
    }
    let mut done = Vec::new();
    scheduler
        .run(|c| {
            done.push(c);
            Ok(())
        })
        .unwrap();
    let (steps, preemptions) = (scheduler.steps, scheduler.preemptions);
    done.sort_by_key(|c| c.index);
    (done, steps, preemptions)
}

fn batched_greedy_equals_each_prompt_alone_with_one_forward_pass_per_step<B: Backend>(m: &SuiteModel<B>) {
    let prompts = prompts(m);
    let expected: Vec<Vec<u32>> = prompts.iter().map(|p| m.solo(p, MAX_TOKENS)).collect();
    for layout in [CacheLayout::plain(4, CONTEXT), CacheLayout::paged(16, 4 * CONTEXT / 16)] {
        let mut runner = m.runner(layout);
        let (done, steps, _) =
            batched(&mut runner, &prompts, SchedulerOptions { max_seqs: 4, max_batch_tokens: 512, speculate: 0 });
        for (c, want) in done.iter().zip(&expected) {
            m.assert_same_greedy(
                &prompts[c.index],
                want,
                &c.tokens,
                &format!("prompt {} batched, {layout:?}", c.index),
            );
        }
        assert_eq!(runner.forward_passes, steps, "one forward pass per scheduler step");
        let generated: usize = done.iter().map(|c| c.tokens.len()).sum();
        assert!((steps as usize) < generated / 2, "{steps} steps for {generated} tokens: sequences were not batched");
        assert_eq!(runner.cache.blocks_in_use(), 0, "pages leaked");
    }
}

fn a_shared_prefix_is_not_recomputed_and_changes_nothing<B: Backend>(m: &SuiteModel<B>) {
    let base = m.prompt("pub_long_repetitive_400");
    let (a, b) = (base[..300].to_vec(), [&base[..200], &base[350..]].concat());
    let expected = [m.solo(&a, MAX_TOKENS), m.solo(&b, MAX_TOKENS)];
    let mut runner = m.runner(CacheLayout::paged(16, 128));
    // One sequence at a time, so the second prompt finds the first one's pages cached.
    let (done, _, _) = batched(
        &mut runner,
        &[a.clone(), b.clone()],
        SchedulerOptions { max_seqs: 1, max_batch_tokens: 512, speculate: 0 },
    );
    m.assert_same_greedy(&a, &expected[0], &done[0].tokens, "first prompt");
    m.assert_same_greedy(&b, &expected[1], &done[1].tokens, "second prompt, on shared pages");
    assert_eq!(done[0].cached_prompt_tokens, 0);
    assert_eq!(done[1].cached_prompt_tokens, 192, "the 12 full pages of the 200 shared tokens are reused");
    assert!(runner.cache.stats().prefix_hits >= 12);
}

fn a_preempted_sequence_continues_exactly_as_if_it_had_never_been<B: Backend>(m: &SuiteModel<B>) {
    let prompts = prompts(m);
    let expected: Vec<Vec<u32>> = prompts.iter().map(|p| m.solo(p, MAX_TOKENS)).collect();
    // The four prompts with their 12 new tokens need 3 + 3 + 27 + 3 pages of 16; the pool has 32.
    let mut runner = m.runner(CacheLayout::paged(16, 32));
    let (done, _, preemptions) =
        batched(&mut runner, &prompts, SchedulerOptions { max_seqs: 4, max_batch_tokens: 512, speculate: 0 });
    assert!(preemptions > 0, "the pool was meant to run out");
    for (c, want) in done.iter().zip(&expected) {
        let what = format!("prompt {} (preempted {} times)", c.index, c.preemptions);
        m.assert_same_greedy(&prompts[c.index], want, &c.tokens, &what);
    }
    assert_eq!(runner.cache.blocks_in_use(), 0);
}

macro_rules! serving_suite {
    ($name:ident, $what:literal, $require:literal, $make:expr, exact: $exact:expr, real: $real:expr) => {
        backend_suite!($name, $what, $require, $make, exact: $exact, real: $real, [
            batched_greedy_equals_each_prompt_alone_with_one_forward_pass_per_step,
            a_shared_prefix_is_not_recomputed_and_changes_nothing,
            a_preempted_sequence_continues_exactly_as_if_it_had_never_been,
        ]);
    };
}

serving_suite!(cpu, "cpu", "", Ok::<_, ultra::Error>(ultra::Cpu::new()), exact: |_| true, real: |_| true);
#[cfg(feature = "wgpu")]
serving_suite!(wgpu, "wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::new(), exact: |b: &ultra::Wgpu| b.is_batch_invariant(), real: |b: &ultra::Wgpu| !b.is_software());
#[cfg(feature = "cuda")]
serving_suite!(cuda, "CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0), exact: |_| false, real: |_| true);
