//! Decoding with the device's top-k candidates (`Runner::forward_top_k` + `Sampler::sample_top_k`,
//! falling back to the full logits) emits exactly the tokens of sampling the full logits, with the
//! same seeds, on the CPU and (when an adapter exists) wgpu backends.

mod common;

use common::tiny::{TinySpec, tiny_gguf};
use ultra::Backend;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{GenerateOptions, generate, prefill};
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Runner};

const VOCAB: usize = 1000; // more than MAX_TOP_K, so the candidates are a real subset
const STEPS: usize = 24;

fn configs() -> Vec<SamplerConfig> {
    let base = SamplerConfig { temperature: 0.9, seed: 11, ..SamplerConfig::default() };
    vec![
        SamplerConfig { top_k: 40, ..base.clone() },
        SamplerConfig { top_k: 256, top_p: 0.9, ..base.clone() },
        SamplerConfig { top_p: 0.9, ..base.clone() },
        SamplerConfig { top_p: 0.5, min_p: 0.05, ..base.clone() },
        SamplerConfig { min_p: 0.1, ..base },
    ]
}

fn runner<B: Backend>(backend: B, logit_scale: f32) -> Runner<B> {
    let spec = TinySpec { vocab: VOCAB, logit_scale, ..TinySpec::default() };
    Runner::load(backend, &tiny_gguf(&spec), CacheLayout::plain(1, 256), 256).unwrap()
}

/// Steps `reference` with full logits and `device` with candidates side by side; returns how
/// many steps the candidates decided.
fn step_both<B: Backend>(reference: &mut Runner<B>, device: &mut Runner<B>, config: &SamplerConfig) -> usize {
    let prompt = [1, 2, 3, 4];
    let (seq_r, seq_d) = (reference.cache.add_seq(), device.cache.add_seq());
    let (mut sampler_r, mut sampler_d) = (Sampler::new(config.clone()).unwrap(), Sampler::new(config.clone()).unwrap());
    let logits = prefill(reference, seq_r, &prompt, 512).unwrap();
    prefill(device, seq_d, &prompt, 512).unwrap();
    let mut history = prompt.to_vec();
    let mut next = sampler_r.sample(&logits, &history);
    sampler_d.sample(&logits, &history);
    let mut decided = 0;
    for step in 0..STEPS {
        history.push(next);
        let pos = prompt.len() + step;
        reference.forward(&Batch::sequence(seq_r, pos, &[next], false)).unwrap();
        let expected = sampler_r.sample(reference.logits(0), &history);
        let k = sampler_d.top_k_request(VOCAB).expect("these configs use candidates");
        let top = device.forward_top_k(&Batch::sequence(seq_d, pos, &[next], false), k).unwrap();
        let (ids, vals) = top.row(0);
        let got = match sampler_d.sample_top_k(ids, vals, VOCAB) {
            Some(token) => {
                decided += 1;
                token
            }
            None => {
                device.read_logits().unwrap();
                sampler_d.sample(device.logits(0), &history)
            }
        };
        assert_eq!(got, expected, "step {step} of {config:?}");
        next = expected;
    }
    reference.cache.remove_seq(seq_r).unwrap();
    device.cache.remove_seq(seq_d).unwrap();
    decided
}

/// `generate` (which samples through `forward_and_sample`) against a plain full-logits loop.
fn generate_matches_full_logits<B: Backend>(runner: &mut Runner<B>, config: &SamplerConfig) {
    let prompt = [5, 6, 7];
    let opts = GenerateOptions { max_tokens: STEPS, prefill_chunk: 512, eog: vec![] };
    let seq = runner.cache.add_seq();
    let mut sampler = Sampler::new(config.clone()).unwrap();
    let got = generate(runner, seq, &prompt, &mut sampler, &opts, |_| Ok(())).unwrap().tokens;
    runner.cache.remove_seq(seq).unwrap();
    let seq = runner.cache.add_seq();
    let mut sampler = Sampler::new(config.clone()).unwrap();
    let mut history = prompt.to_vec();
    let mut expected = vec![sampler.sample(&prefill(runner, seq, &prompt, 512).unwrap(), &history)];
    while expected.len() < STEPS {
        let last = *expected.last().unwrap();
        history.push(last);
        runner.forward(&Batch::sequence(seq, history.len() - 1, &[last], false)).unwrap();
        expected.push(sampler.sample(runner.logits(0), &history));
    }
    runner.cache.remove_seq(seq).unwrap();
    assert_eq!(got, expected, "{config:?}");
}

fn check_backend<B: Backend>(make: impl Fn() -> B) {
    // A peaked model (the candidates decide nearly every step) and a flat one (they often cannot).
    let (mut decided, mut total) = (0, 0);
    for logit_scale in [8.0, 0.3] {
        let (mut reference, mut device) = (runner(make(), logit_scale), runner(make(), logit_scale));
        for config in configs() {
            decided += step_both(&mut reference, &mut device, &config);
            total += STEPS;
            generate_matches_full_logits(&mut device, &config);
        }
    }
    assert!(decided > 0 && decided < total, "candidates decided {decided} of {total} steps");
}

#[test]
fn cpu_candidates_sample_as_the_full_logits() {
    check_backend(ultra::Cpu::new);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_candidates_sample_as_the_full_logits() {
    let options = ultra::backend::wgpu::Options::from_env;
    match ultra::Wgpu::with_options(options()) {
        Ok(_) => check_backend(|| ultra::Wgpu::with_options(options()).unwrap()),
        Err(e) => {
            assert!(std::env::var("ULTRA_REQUIRE_WGPU").as_deref() != Ok("1"), "ULTRA_REQUIRE_WGPU=1 but {e}");
            eprintln!("SKIPPED: no wgpu device: {e}");
        }
    }
}
