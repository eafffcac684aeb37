//! The end-to-end checks, each written once for any backend and driven by the backend's row of
//! tolerances.rs: a `None` there skips that assertion. main.rs lists which checks each backend runs.

use serde_json::Value;
use ultra::generate::perplexity::log_softmax_at;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{GenerateOptions, generate, perplexity};
use ultra::model::{Batch, Runner};
use ultra::{Backend, Cpu};

use crate::common::{
    floats, greedy_cases, ids, load_json, reference_runner, teacher_forced, teacher_forced_by_step, top2,
};
use crate::tolerances::Profile;

// The second model's checks, listed with these in main.rs.
pub use crate::gemma3::{gemma3_greedy_ids_match_the_cpu_until_a_near_tie, gemma3_teacher_forced_logits_match_the_cpu};

const CONTEXT: usize = 1024;

/// The reference prompts (greedy.json) this backend runs.
fn cases(profile: &Profile) -> Vec<Value> {
    greedy_cases().into_iter().take(profile.scale.prompts).collect()
}

/// Greedy generation of `n` tokens with the plain decode loop (the prompt in one chunk).
fn greedy<B: Backend>(runner: &mut Runner<B>, prompt: &[u32], n: usize) -> Vec<u32> {
    let seq = runner.cache.add_seq();
    let opts = GenerateOptions { max_tokens: n, prefill_chunk: 512, eog: vec![0, 2] };
    let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
    let got = generate(runner, seq, prompt, &mut sampler, &opts, |_| Ok(())).unwrap().tokens;
    runner.cache.remove_seq(seq).unwrap();
    got
}

/// The first index where `a` and `b` differ, over their common length.
pub fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// (NMSE, max |Δ|) of `got` against `want`.
pub fn nmse(got: &[f32], want: &[f32]) -> (f64, f64) {
    let (mut err, mut norm, mut max_abs) = (0f64, 0f64, 0f64);
    for (&a, &b) in got.iter().zip(want) {
        let d = a as f64 - b as f64;
        err += d * d;
        norm += (b as f64) * (b as f64);
        max_abs = max_abs.max(d.abs());
    }
    (err / norm.max(1e-30), max_abs)
}

/// Prompt ++ llama.cpp's greedy tokens in one batch: each step's logits against the CPU's, the
/// f64 forward pass and llama.cpp's, as far as the backend's row asks.
pub fn teacher_forced_logits_match_the_references<B: Backend>(backend: B, profile: &Profile) {
    let tol = profile.tol;
    let name_of_backend = backend.name();
    let mut runner = reference_runner(backend, CONTEXT);
    let mut cpu = tol.logits_vs_cpu.map(|_| reference_runner(Cpu::exact(), CONTEXT));
    let (mut worst_nmse, mut worst_abs, mut worst_llama, mut worst_f64) = (0f64, 0f64, 0f64, 0f64);
    for case in cases(profile) {
        let name = case["name"].as_str().unwrap();
        let (prompt, mut generated) = (ids(&case["prompt_ids"]), ids(&case["generated_ids"]));
        generated.truncate(profile.scale.steps.max(2));
        let (gaps, chosen, logprobs) =
            (floats(&case["top2_gap"]), floats(&case["chosen_logits"]), floats(&case["logprobs"]));
        let f64_ref = &case["f64_reference"];
        let logits = if profile.by_step {
            teacher_forced_by_step(&mut runner, &prompt, &generated)
        } else {
            teacher_forced(&mut runner, &prompt, &generated)
        };
        let cpu_logits = cpu.as_mut().map(|cpu| teacher_forced(cpu, &prompt, &generated));
        for (s, row) in logits.iter().enumerate() {
            if let (Some(close), Some(want)) = (tol.logits_vs_cpu, &cpu_logits) {
                let (nmse, max_abs) = nmse(row, &want[s]);
                (worst_nmse, worst_abs) = (worst_nmse.max(nmse), worst_abs.max(max_abs));
                assert!(
                    nmse < close.nmse && max_abs < close.max_abs,
                    "{name} step {s}: NMSE {nmse:.2e}, max |Δ| {max_abs:.3} vs the CPU"
                );
            }
            if let Some(gap) = tol.argmax_is_llama_from_gap
                && gaps[s] >= gap
            {
                assert_eq!(
                    top2(row).0,
                    generated[s],
                    "{name}: argmax differs from llama.cpp at step {s} (its gap {})",
                    gaps[s]
                );
            }
            if let Some(limit) = tol.logprob_vs_f64 {
                let ours = log_softmax_at(row, generated[s] as usize);
                let reference = floats(&f64_ref["logprob_of_generated_token"])[s];
                worst_f64 = worst_f64.max((ours - reference).abs());
                assert!((ours - reference).abs() < limit, "{name} step {s}: log-prob {ours} vs f64 {reference}");
            }
        }
        for step in [0usize, 8] {
            let Some(top10) = case[format!("top10_step{step}")].as_array().filter(|_| step < logits.len()) else {
                continue;
            };
            // llama.cpp's log-sum-exp at this step, recovered from its chosen token's logit and log-prob.
            let lse = chosen[step] - logprobs[step];
            for (j, pair) in top10.iter().enumerate() {
                let (id, logit) = (pair[0].as_u64().unwrap() as usize, pair[1].as_f64().unwrap());
                if let Some(limit) = tol.top10_logprob_vs_llama {
                    let diff = (log_softmax_at(&logits[step], id) - (logit - lse)).abs();
                    worst_llama = worst_llama.max(diff);
                    assert!(diff < limit, "{name} step {step} id {id}: log-prob off llama.cpp's by {diff}");
                }
                if let Some(limit) = tol.top10_logit_vs_f64 {
                    let want = floats(&f64_ref[format!("logits_of_llama_top10_ids_step{step}")])[j];
                    let diff = (logits[step][id] as f64 - want).abs();
                    worst_f64 = worst_f64.max(diff);
                    assert!(diff < limit, "{name} step {step} id {id}: logit {} vs f64 {want}", logits[step][id]);
                }
            }
        }
    }
    let mut worst = Vec::new();
    if tol.logits_vs_cpu.is_some() {
        worst.push(format!("vs the CPU NMSE {worst_nmse:.2e}, max |Δ| {worst_abs:.4}"));
    }
    if tol.top10_logprob_vs_llama.is_some() {
        worst.push(format!("vs llama.cpp's top-10 log-probs {worst_llama:.4}"));
    }
    if tol.logprob_vs_f64.is_some() || tol.top10_logit_vs_f64.is_some() {
        worst.push(format!("vs the f64 reference {worst_f64:.4}"));
    }
    eprintln!("{name_of_backend}, worst |Δ|: {}", worst.join("; "));
}

/// Free-running greedy decoding: the ids equal llama.cpp's, and on a GPU the CPU's, up to the
/// first step where the reference's own top-2 gap says the choice was a near-tie.
pub fn greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie<B: Backend>(backend: B, profile: &Profile) {
    let tol = profile.tol;
    let mut runner = reference_runner(backend, CONTEXT);
    let mut cpu = tol.greedy_near_tie_cpu.map(|near_tie| (reference_runner(Cpu::exact(), CONTEXT), near_tie));
    for case in cases(profile) {
        let name = case["name"].as_str().unwrap();
        let (prompt, expected, gaps) =
            (ids(&case["prompt_ids"]), ids(&case["generated_ids"]), floats(&case["top2_gap"]));
        let n = expected.len().min(profile.scale.steps);
        let got = greedy(&mut runner, &prompt, n);
        match first_difference(&got, &expected) {
            None => assert_eq!(got.len(), n, "{name}: stopped at a different length"),
            Some(s) => {
                assert!(
                    gaps[s] < tol.greedy_near_tie_llama,
                    "{name}: step {s} chose {} where llama.cpp chose {} with gap {}",
                    got[s],
                    expected[s],
                    gaps[s]
                );
                eprintln!("{name}: first divergence from llama.cpp at step {s} (its gap {:.3})", gaps[s]);
            }
        }
        let Some((cpu, near_tie)) = cpu.as_mut() else { continue };
        let want = greedy(cpu, &prompt, n);
        match first_difference(&got, &want) {
            None => eprintln!("{name}: {} ids equal to the CPU's", got.len().min(want.len())),
            Some(s) => {
                let gap = top2(&teacher_forced(cpu, &prompt, &want[..=s])[s]).1;
                assert!(
                    gap < *near_tie,
                    "{name}: step {s} chose {} where the CPU chose {} (CPU gap {gap:.4})",
                    got[s],
                    want[s]
                );
                eprintln!("{name}: first divergence from the CPU at step {s} (CPU gap {gap:.4})");
            }
        }
    }
}

/// Chunking is scheduling, not approximation: on a batch-invariant backend, uneven chunks
/// (single tokens included) give the one-batch logits bit for bit.
pub fn chunked_prefill_and_decode_are_bit_identical_to_one_batch<B: Backend>(backend: B, _: &Profile) {
    let mut runner = reference_runner(backend, CONTEXT);
    let case = greedy_cases().into_iter().find(|c| c["name"] == "pub_long_repetitive_400").unwrap();
    let prompt = ids(&case["prompt_ids"]);
    let seq = runner.cache.add_seq();
    runner.forward(&Batch::sequence(seq, 0, &prompt, true)).unwrap();
    let whole: Vec<Vec<f32>> = (0..prompt.len()).map(|i| runner.logits(i).to_vec()).collect();
    runner.cache.remove_seq(seq).unwrap();
    let seq = runner.cache.add_seq();
    let mut start = 0;
    for size in [1usize, 7, 64, 1, 33, 128].into_iter().cycle() {
        let end = (start + size).min(prompt.len());
        runner.forward(&Batch::sequence(seq, start, &prompt[start..end], true)).unwrap();
        for (i, want) in whole.iter().enumerate().take(end).skip(start) {
            assert!(
                runner.logits(i - start) == want.as_slice(),
                "logits at position {i} differ from the one-batch run"
            );
        }
        start = end;
        if start == prompt.len() {
            break;
        }
    }
    runner.cache.remove_seq(seq).unwrap();
}

/// Perplexity as llama.cpp computes it (non-overlapping chunks of `ctx`), against llama.cpp's
/// figure and chunk counts and/or the CPU's on the same tokens.
fn check_perplexity<B: Backend>(backend: B, profile: &Profile, ctx: usize) {
    let refs = load_json("smollm2/perplexity.json");
    let text = ids(&refs["text"]["token_ids"]);
    let tokens = &text[..ctx.saturating_mul(profile.scale.ppl_chunks).min(text.len())];
    let name = backend.name();
    let got = perplexity(&mut reference_runner(backend, ctx), tokens, ctx, ctx, |_, _| {}).unwrap();
    eprintln!("{name}, ctx {ctx}, {} chunks: PPL {:.4} ± {:.5}", got.n_chunks, got.ppl, got.stderr);
    if let Some(limit) = profile.tol.ppl_vs_llama {
        assert_eq!(tokens.len(), text.len(), "llama.cpp's perplexity is over the whole text");
        let run = refs["runs"].as_array().unwrap().iter().find(|r| r["n_ctx"] == ctx).unwrap();
        let expected = run["ppl"].as_f64().unwrap();
        eprintln!("ctx {ctx}: llama.cpp {expected}, f64 {}", run["f64_reference_ppl"]);
        assert_eq!(got.n_chunks as u64, run["n_chunks"].as_u64().unwrap());
        assert_eq!(got.tokens_scored as u64, run["tokens_scored"].as_u64().unwrap());
        assert!(
            (got.ppl / expected - 1.0).abs() < limit,
            "ctx {ctx}: PPL {} is not within {limit} of llama.cpp's {expected}",
            got.ppl
        );
    }
    if let Some(limit) = profile.tol.ppl_vs_cpu {
        let want = perplexity(&mut reference_runner(Cpu::exact(), ctx), tokens, ctx, ctx, |_, _| {}).unwrap();
        eprintln!("ctx {ctx}: cpu PPL {:.4}", want.ppl);
        assert!(
            (got.ppl / want.ppl - 1.0).abs() < limit,
            "ctx {ctx}: PPL {} is not within {limit} of the CPU's {}",
            got.ppl,
            want.ppl
        );
    }
}

pub fn perplexity_ctx_128_matches_the_references<B: Backend>(backend: B, profile: &Profile) {
    check_perplexity(backend, profile, 128);
}

pub fn perplexity_ctx_512_matches_the_references<B: Backend>(backend: B, profile: &Profile) {
    check_perplexity(backend, profile, 512);
}

/// Replayed CUDA graphs run the very launches an eager step makes: the same ids, bit for bit.
#[cfg(feature = "cuda")]
pub fn greedy_ids_are_the_same_with_and_without_cuda_graphs(on: ultra::Cuda, profile: &Profile) {
    let mut off = ultra::Cuda::new(0).expect("a second CUDA backend on the device just found");
    off.set_graphs(false);
    let (mut on, mut off) = (reference_runner(on, CONTEXT), reference_runner(off, CONTEXT));
    for case in cases(profile) {
        let prompt = ids(&case["prompt_ids"]);
        let n = ids(&case["generated_ids"]).len().min(profile.scale.steps);
        assert_eq!(greedy(&mut on, &prompt, n), greedy(&mut off, &prompt, n), "{}", case["name"]);
    }
}
