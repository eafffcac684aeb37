//! Speculative decoding: greedy verification must reproduce plain greedy decoding exactly for
//! every drafter and window; sampled verification must leave the output distribution equal to
//! the target's (checked with a chi-square test on a tiny random model over many seeds).

mod common;

use std::sync::Arc;

use common::suite::{CONTEXT, SuiteModel};
use common::tiny::{TinySpec, tiny_gguf};
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{
    Drafter, GenerateOptions, LookupDrafter, ModelDrafter, NgramDrafter, SpecOptions, generate_speculative,
};
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Llama, Runner};
use ultra::{Backend, Cpu};

fn greedy_opts(max_tokens: usize) -> GenerateOptions {
    GenerateOptions { max_tokens, prefill_chunk: 512, eog: vec![0, 2] }
}

fn greedy() -> Sampler {
    Sampler::new(SamplerConfig::default()).unwrap()
}

fn drafter<B: Backend>(m: &SuiteModel<B>, mode: &str) -> Box<dyn Drafter> {
    match mode {
        // The target's first third of its layers and its head.
        "self" => {
            let depth = (m.model.config.n_layers / 3).max(1);
            let r = Runner::with_depth(
                m.backend.clone(),
                m.model.clone(),
                CacheLayout::paged(16, CONTEXT / 16),
                CONTEXT,
                depth,
            );
            Box::new(ModelDrafter::new(r.unwrap(), None, 512))
        }
        // A separate runner with the same vocabulary (here the same weights: drafts are then
        // almost always right, which exercises long acceptances).
        "model" => Box::new(ModelDrafter::new(m.runner(CacheLayout::paged(16, CONTEXT / 8)), None, 512)),
        "ngram" => Box::new(NgramDrafter::new(3)),
        "lookup" => Box::new(LookupDrafter::new(3)),
        _ => unreachable!(),
    }
}

fn speculative_greedy_equals_plain_greedy_for_every_drafter_and_k<B: Backend>(m: &SuiteModel<B>) {
    let prompt = m.prompt("pub_prose_whitespace");
    let max_tokens = 24;
    let plain = m.solo(&prompt, max_tokens);
    for mode in ["lookup", "ngram", "self", "model"] {
        // k = 0 is the adaptive window (k from 1 to 8, on or off as the measured times say:
        // whatever it picks, the tokens must not change).
        for k in 0..=8 {
            let mut runner = m.runner(CacheLayout::paged(16, CONTEXT / 8));
            let seq = runner.cache.add_seq();
            let mut drafter = drafter(m, mode);
            let spec = SpecOptions { k: k.max(1), adaptive: k == 0, k_max: 8 };
            let (out, stats) = generate_speculative(
                &mut runner,
                seq,
                &prompt,
                &mut greedy(),
                &greedy_opts(max_tokens),
                drafter.as_mut(),
                spec,
                |_| Ok(()),
            )
            .unwrap();
            m.assert_same_greedy(&prompt, &plain, &out.tokens, &format!("{mode} k={k} ({stats:?})"));
            assert_eq!(
                runner.cache.seq_len(seq).unwrap(),
                prompt.len() + out.tokens.len() - 1,
                "{mode} k={k}: cache not rolled back exactly"
            );
        }
    }
}

fn prompt_lookup_accepts_most_drafts_on_a_repetitive_prompt<B: Backend>(m: &SuiteModel<B>) {
    if !m.real {
        return; // a random model does not copy the passage, so there is nothing to look up
    }
    let prompt = m.prompt("pub_long_repetitive_400");
    let mut runner = m.runner(CacheLayout::paged(16, CONTEXT / 8));
    let seq = runner.cache.add_seq();
    let mut drafter = drafter(m, "lookup");
    // A fixed window: the adaptive one also reacts to measured speed, which would make this
    // count depend on the machine's load (src/generate/adaptive.rs has its own tests).
    let spec = SpecOptions { k: 8, adaptive: false, k_max: 8 };
    let (out, stats) = generate_speculative(
        &mut runner,
        seq,
        &prompt,
        &mut greedy(),
        &greedy_opts(48),
        drafter.as_mut(),
        spec,
        |_| Ok(()),
    )
    .unwrap();
    let passes = runner.forward_passes;
    eprintln!(
        "lookup: {} tokens in {passes} target passes, acceptance {:.2}, {stats:?}",
        out.tokens.len(),
        stats.acceptance_rate()
    );
    assert!(stats.acceptance_rate() > 0.6, "{stats:?}");
    assert!((passes as usize) * 2 < out.tokens.len(), "{passes} target passes for {} tokens", out.tokens.len());
}

macro_rules! speculative_suite {
    ($name:ident, $what:literal, $require:literal, $make:expr, exact: $exact:expr, real: $real:expr) => {
        backend_suite!($name, $what, $require, $make, exact: $exact, real: $real, [
            speculative_greedy_equals_plain_greedy_for_every_drafter_and_k,
            prompt_lookup_accepts_most_drafts_on_a_repetitive_prompt,
        ]);
    };
}

speculative_suite!(cpu, "cpu", "", Ok::<_, ultra::Error>(ultra::Cpu::new()), exact: |_| true, real: |_| true);
#[cfg(feature = "wgpu")]
speculative_suite!(wgpu, "wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::new(), exact: |b: &ultra::Wgpu| b.is_batch_invariant(), real: |b: &ultra::Wgpu| !b.is_software());
#[cfg(feature = "cuda")]
speculative_suite!(cuda, "CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0), exact: |_| false, real: |_| true);

/// Target's exact distribution of the second generated token, Σ_t1 p(t1) · p(t2 | t1), at temperature 1.
fn second_token_distribution(runner: &mut Runner<Cpu>, prompt: &[u32], vocab: usize) -> Vec<f64> {
    let softmax = |x: &[f32]| {
        let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let e: Vec<f64> = x.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(|v| v / s).collect::<Vec<f64>>()
    };
    let seq = runner.cache.add_seq();
    runner.forward(&Batch::sequence(seq, 0, prompt, false)).unwrap();
    let p1 = softmax(runner.logits(0));
    let mut p2 = vec![0f64; vocab];
    for (t1, &p_t1) in p1.iter().enumerate() {
        runner.forward(&Batch::sequence(seq, prompt.len(), &[t1 as u32], false)).unwrap();
        let cond = softmax(runner.logits(0));
        p2.iter_mut().zip(cond).for_each(|(a, c)| *a += p_t1 * c);
        runner.cache.truncate(seq, prompt.len()).unwrap();
    }
    runner.cache.remove_seq(seq).unwrap();
    p2
}

/// The verifier runs on the host, the same for every backend: checked on the CPU.
#[test]
fn speculative_sampling_preserves_the_target_distribution() {
    let spec_t = TinySpec { logit_scale: 0.7, ..TinySpec::default() };
    let target = tiny_gguf(&spec_t);
    let draft = tiny_gguf(&TinySpec { seed: 99, logit_scale: 0.7, ..TinySpec::default() });
    let cpu = Arc::new(Cpu::new());
    let target_model = Arc::new(Llama::load(&*cpu, &target).unwrap());
    let draft_model = Arc::new(Llama::load(&*cpu, &draft).unwrap());
    let layout = CacheLayout::paged(8, 32);
    let prompt = [3u32, 1, 4, 1, 5, 9, 2, 6];
    let mut runner = Runner::new(cpu.clone(), target_model.clone(), layout, 256).unwrap();
    let expected = second_token_distribution(&mut runner, &prompt, spec_t.vocab);
    for mode in ["model", "ngram"] {
        let n = 4000;
        let mut counts = vec![0usize; spec_t.vocab];
        for seed in 0..n as u64 {
            let config = SamplerConfig { temperature: 1.0, seed, ..SamplerConfig::default() };
            let mut drafter: Box<dyn Drafter> = match mode {
                "model" => {
                    let r = Runner::new(cpu.clone(), draft_model.clone(), layout, 256).unwrap();
                    let draft_sampler = SamplerConfig { seed: seed ^ 0xabcdef, ..config.clone() };
                    Box::new(ModelDrafter::new(r, Some(Sampler::new(draft_sampler).unwrap()), 64))
                }
                _ => Box::new(NgramDrafter::new(2)),
            };
            let mut runner = Runner::new(cpu.clone(), target_model.clone(), layout, 256).unwrap();
            let seq = runner.cache.add_seq();
            let opts = GenerateOptions { max_tokens: 2, prefill_chunk: 64, eog: vec![] };
            let spec = SpecOptions { k: 3, adaptive: false, k_max: 3 };
            let (out, _) = generate_speculative(
                &mut runner,
                seq,
                &prompt,
                &mut Sampler::new(config).unwrap(),
                &opts,
                drafter.as_mut(),
                spec,
                |_| Ok(()),
            )
            .unwrap();
            counts[out.tokens[1] as usize] += 1;
        }
        // Pearson chi-square over the tokens expected at least 5 times (others pooled).
        let (mut chi2, mut dof, mut pooled_obs, mut pooled_exp) = (0f64, 0usize, 0f64, 0f64);
        for (o, p) in counts.iter().zip(&expected) {
            let e = p * n as f64;
            if e >= 5.0 {
                chi2 += (*o as f64 - e).powi(2) / e;
                dof += 1;
            } else {
                pooled_obs += *o as f64;
                pooled_exp += e;
            }
        }
        if pooled_exp > 0.0 {
            chi2 += (pooled_obs - pooled_exp).powi(2) / pooled_exp.max(1e-9);
            dof += 1;
        }
        // 99.9th percentile of chi-square with up to 16 degrees of freedom is below 40.
        eprintln!("{mode}: chi2 = {chi2:.1} with {} dof", dof - 1);
        assert!(
            chi2 < 40.0,
            "{mode}: chi2 {chi2:.1} ({} dof): output distribution differs from the target's\n{counts:?}\n{expected:?}",
            dof - 1
        );
    }
}
