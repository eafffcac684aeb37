//! The second real model, Gemma 3 270M Q4_K_M (k-quant mix: Q4_K, Q5_K, Q6_K, Q8_0 tensors),
//! on a GPU backend against the CPU backend: the CPU itself is held to transformers' float32
//! reference by tests/gemma3_reference.rs, so agreement with it carries over. The same Tol row as
//! SmolLM2's (tolerances.rs): the numerics that row describes are per kernel, not per model.

use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;
use ultra::tokenizer::Tokenizer;
use ultra::{Backend, Cpu};

use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{GenerateOptions, generate};

use crate::checks::{first_difference, nmse};
use crate::common::{gemma3_path, teacher_forced, teacher_forced_by_step, top2};
use crate::tolerances::Profile;

const CONTEXT: usize = 512;

/// Continuations for a base model (no chat template); each runs past its first few tokens.
const PROMPTS: [&str; 4] = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three primary colours are",
    "Water boils at a temperature of",
];

fn runner<B: Backend>(backend: B) -> Runner<B> {
    let gguf = Gguf::open(&gemma3_path()).expect("gemma3-270m loads");
    Runner::load(backend, &gguf, CacheLayout::plain(2, CONTEXT), CONTEXT).expect("gemma3 runner")
}

/// The prompts this backend runs, tokenized as `generate` does (BOS first: Gemma adds it), and
/// the tokenizer's end-of-generation ids.
fn prompts(profile: &Profile) -> (Vec<(&'static str, Vec<u32>)>, Vec<u32>) {
    let gguf = Gguf::open(&gemma3_path()).expect("gemma3-270m loads");
    let tokenizer = Tokenizer::from_gguf(&gguf).expect("gemma3 tokenizer");
    let n = profile.scale.prompts.min(PROMPTS.len());
    let cases = PROMPTS[..n].iter().map(|&p| (p, tokenizer.encode_with_specials(p, false).expect("tokenizes")));
    (cases.collect(), tokenizer.eog_ids().to_vec())
}

/// Greedy generation of up to `n` tokens with the plain decode loop (the prompt in one chunk).
fn greedy<B: Backend>(runner: &mut Runner<B>, prompt: &[u32], n: usize, eog: &[u32]) -> Vec<u32> {
    let seq = runner.cache.add_seq();
    let opts = GenerateOptions { max_tokens: n, prefill_chunk: 512, eog: eog.to_vec() };
    let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
    let got = generate(runner, seq, prompt, &mut sampler, &opts, |_| Ok(())).unwrap().tokens;
    runner.cache.remove_seq(seq).unwrap();
    got
}

/// Free-running greedy ids equal the CPU's up to the first step where the CPU's own top-2 gap is
/// a near-tie (nothing is compared after the first difference).
pub fn gemma3_greedy_ids_match_the_cpu_until_a_near_tie<B: Backend>(backend: B, profile: &Profile) {
    let Some(near_tie) = profile.tol.greedy_near_tie_cpu else { return };
    let steps = profile.scale.steps.min(24);
    let (mut runner, mut cpu) = (runner(backend), runner(Cpu::exact()));
    let (cases, eog) = prompts(profile);
    for (text, prompt) in cases {
        let (got, want) = (greedy(&mut runner, &prompt, steps, &eog), greedy(&mut cpu, &prompt, steps, &eog));
        match first_difference(&got, &want) {
            None => {
                assert_eq!(got.len(), want.len(), "{text:?}: stopped at a different length");
                eprintln!("gemma3 {text:?}: {} ids equal to the CPU's", got.len());
            }
            Some(s) => {
                let gap = top2(&teacher_forced(&mut cpu, &prompt, &want[..=s])[s]).1;
                assert!(
                    gap < near_tie,
                    "{text:?}: step {s} chose {} where the CPU chose {} (gap {gap:.4})",
                    got[s],
                    want[s]
                );
                eprintln!("gemma3 {text:?}: first divergence from the CPU at step {s} (CPU gap {gap:.4})");
            }
        }
    }
}

/// Prompt ++ the CPU's greedy ids in one batch (the prefill kernels; the greedy check above runs
/// the decode ones): every step's logits within the backend's row of the CPU's.
pub fn gemma3_teacher_forced_logits_match_the_cpu<B: Backend>(backend: B, profile: &Profile) {
    let Some(close) = profile.tol.logits_vs_cpu else { return };
    let steps = profile.scale.steps.min(24);
    let (mut runner, mut cpu) = (runner(backend), runner(Cpu::exact()));
    let (mut worst_nmse, mut worst_abs) = (0f64, 0f64);
    let (cases, eog) = prompts(profile);
    for (text, prompt) in cases {
        let generated = greedy(&mut cpu, &prompt, steps, &eog);
        let want = teacher_forced(&mut cpu, &prompt, &generated);
        let got = if profile.by_step {
            teacher_forced_by_step(&mut runner, &prompt, &generated)
        } else {
            teacher_forced(&mut runner, &prompt, &generated)
        };
        for (s, (row, want)) in got.iter().zip(&want).enumerate() {
            let (nmse, max_abs) = nmse(row, want);
            (worst_nmse, worst_abs) = (worst_nmse.max(nmse), worst_abs.max(max_abs));
            assert!(
                nmse < close.nmse && max_abs < close.max_abs,
                "gemma3 {text:?} step {s}: NMSE {nmse:.2e}, max |Δ| {max_abs:.3} vs the CPU"
            );
        }
    }
    eprintln!("gemma3 vs the CPU, worst: NMSE {worst_nmse:.2e}, max |Δ| {worst_abs:.4}");
}
