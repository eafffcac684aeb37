//! End to end on the reference model (SmolLM2-135M-Instruct Q4_1), wgpu against the CPU backend
//! and against llama.cpp's outputs (tests/data/smollm2). Tolerances (`Tol`): with f32 kernels wgpu
//! and CPU differ only in summation order, so teacher-forced logits agree to NMSE < 1e-6 and
//! max |Δ| < 0.02; free-running greedy ids may first differ only where the CPU's own top-2 gap
//! is < 0.05; perplexity within 0.5% of the CPU's. With SHADER_F16 the tiled prefill GEMM (m ≥ 64)
//! forms per-block products in f16 (unit roundoff 2^-11 against f32's 2^-24); the decode GEMVs are
//! f32 on every adapter. Measured when the GEMVs also formed f16 products (earlier versions): logits
//! NMSE up to 2.0e-4 and max |Δ| 0.17 on lavapipe, NMSE 7.8e-4 and max |Δ| 0.25 on the H200 (its
//! driver rounds the f16 chains differently), and with the tiled GEMM added, on lavapipe, NMSE
//! 8.9e-5, max |Δ| 0.10 and perplexity 0.29% off. The f16 limits are NMSE 2e-3 (the CUDA suite's limit for its
//! int8/f16 paths, about 2.5× the worst seen) and about 2–4× the rest. On a software adapter (lavapipe, in CI) the
//! same kinds of check run on fewer prompts, shorter generations and fewer perplexity chunks.
//! Skips loudly without an adapter unless `ULTRA_REQUIRE_WGPU=1`.
#![cfg(feature = "wgpu")]

mod common;

use common::{floats, teacher_forced};

use serde_json::Value;
use ultra::generate::perplexity;
use ultra::generate::perplexity::log_softmax_at;
use ultra::model::Batch;
use ultra::{Cpu, Wgpu};

/// How far wgpu may be from the CPU and from llama.cpp (see the module doc for the numbers).
struct Tol {
    nmse: f64,
    max_abs: f64,
    /// CPU top-2 gap below which a different greedy choice is a legitimate near-tie.
    near_tie_cpu: f32,
    /// llama.cpp's top-2 gap below which its choice and ours may differ (tests/model.rs).
    near_tie_llama: f64,
    /// |log-prob − f64 reference log-prob| of the generated token.
    logprob: f64,
    /// |PPL / CPU PPL − 1|.
    ppl: f64,
}

fn tol(be: &Wgpu) -> Tol {
    if be.knobs().1 {
        Tol { nmse: 2e-3, max_abs: 0.5, near_tie_cpu: 0.4, near_tie_llama: 0.8, logprob: 0.2, ppl: 0.02 }
    } else {
        Tol { nmse: 1e-6, max_abs: 0.02, near_tie_cpu: 0.05, near_tie_llama: 0.3, logprob: 0.05, ppl: 0.005 }
    }
}

/// How much of the reference data to run: all of it on a GPU, a slice on a software adapter.
struct Scale {
    prompts: usize,
    steps: usize,
    ppl_chunks: usize,
}

fn setup() -> Option<(Wgpu, Scale)> {
    let be = match Wgpu::new() {
        Ok(be) => be,
        Err(e) if std::env::var("ULTRA_REQUIRE_WGPU").as_deref() != Ok("1") => {
            let msg = format!("SKIPPED: no wgpu adapter: {e}");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes()); // past the test harness's capture: a skip must be seen
            return None;
        }
        Err(e) => panic!("ULTRA_REQUIRE_WGPU=1 but {e}"),
    };
    let scale = if be.is_software() {
        eprintln!("software adapter: scaled-down end-to-end checks");
        Scale { prompts: 2, steps: 12, ppl_chunks: 2 }
    } else {
        Scale { prompts: usize::MAX, steps: usize::MAX, ppl_chunks: 14 }
    };
    Some((be, scale))
}

fn prompts(scale: &Scale) -> Vec<Value> {
    let all = common::greedy_cases();
    all.into_iter().take(scale.prompts).collect()
}

/// (argmax, top-1 minus top-2).
fn top2(x: &[f32]) -> (u32, f32) {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    let second = x.iter().enumerate().filter(|&(i, _)| i != best).map(|(_, &v)| v).fold(f32::MIN, f32::max);
    (best as u32, x[best] - second)
}

#[test]
fn teacher_forced_logits_match_cpu_and_llama_cpp() {
    let Some((be, scale)) = setup() else { return };
    let tol = tol(&be);
    let (mut gpu, mut cpu) = (common::reference_runner(be, 1024), common::reference_runner(Cpu::new(), 1024));
    let (mut worst_nmse, mut worst_abs) = (0f64, 0f64);
    for case in prompts(&scale) {
        let name = case["name"].as_str().unwrap();
        let (prompt, mut generated) = (common::ids(&case["prompt_ids"]), common::ids(&case["generated_ids"]));
        generated.truncate(scale.steps.max(2));
        let gaps = floats(&case["top2_gap"]);
        let f64_lp = floats(&case["f64_reference"]["logprob_of_generated_token"]);
        let (g, c) = (teacher_forced(&mut gpu, &prompt, &generated), teacher_forced(&mut cpu, &prompt, &generated));
        for s in 0..generated.len() {
            let (mut err, mut norm, mut max_abs) = (0f64, 0f64, 0f64);
            for (&a, &b) in g[s].iter().zip(&c[s]) {
                let d = a as f64 - b as f64;
                err += d * d;
                norm += (b as f64) * (b as f64);
                max_abs = max_abs.max(d.abs());
            }
            worst_nmse = worst_nmse.max(err / norm);
            worst_abs = worst_abs.max(max_abs);
            assert!(
                err / norm < tol.nmse && max_abs < tol.max_abs,
                "{name} step {s}: NMSE {:e}, max |Δ| {max_abs}",
                err / norm
            );
            if gaps[s] >= tol.near_tie_llama {
                assert_eq!(top2(&g[s]).0, generated[s], "{name}: argmax differs from llama.cpp at step {s}");
            }
            let lp = log_softmax_at(&g[s], generated[s] as usize);
            assert!((lp - f64_lp[s]).abs() < tol.logprob, "{name} step {s}: log-prob {lp} vs f64 {}", f64_lp[s]);
        }
    }
    eprintln!("wgpu vs cpu logits: worst NMSE {worst_nmse:e}, worst max |Δ| {worst_abs:.5}");
}

#[test]
fn greedy_ids_match_cpu_until_a_near_tie() {
    let Some((be, scale)) = setup() else { return };
    let tol = tol(&be);
    let (mut gpu, mut cpu) = (common::reference_runner(be, 1024), common::reference_runner(Cpu::new(), 1024));
    for case in prompts(&scale) {
        let name = case["name"].as_str().unwrap();
        let (prompt, expected) = (common::ids(&case["prompt_ids"]), common::ids(&case["generated_ids"]));
        let llama_gaps = floats(&case["top2_gap"]);
        let (sg, sc) = (gpu.cache.add_seq(), cpu.cache.add_seq());
        let mut id_g = gpu.forward_argmax(&Batch::sequence(sg, 0, &prompt, false)).unwrap()[0];
        cpu.forward(&Batch::sequence(sc, 0, &prompt, false)).unwrap();
        let (mut id_c, mut gap) = top2(cpu.logits(0));
        for step in 0..expected.len().min(scale.steps) {
            if id_g != id_c {
                assert!(gap < tol.near_tie_cpu, "{name} step {step}: wgpu chose {id_g}, cpu {id_c} with gap {gap}");
                eprintln!("{name}: first divergence from the CPU at step {step} (cpu gap {gap:.4})");
                break;
            }
            if id_g != expected[step] {
                assert!(
                    llama_gaps[step] < tol.near_tie_llama,
                    "{name} step {step}: {id_g} vs llama.cpp {}",
                    expected[step]
                );
                break;
            }
            let pos = prompt.len() + step;
            id_g = gpu.forward_argmax(&Batch::sequence(sg, pos, &[id_g], false)).unwrap()[0];
            cpu.forward(&Batch::sequence(sc, pos, &[id_c], false)).unwrap();
            (id_c, gap) = top2(cpu.logits(0));
        }
        gpu.cache.remove_seq(sg).unwrap();
        cpu.cache.remove_seq(sc).unwrap();
    }
}

#[test]
fn perplexity_close_to_cpu() {
    let Some((be, scale)) = setup() else { return };
    let tol = tol(&be);
    let refs = common::load_json("smollm2/perplexity.json");
    let tokens = common::ids(&refs["text"]["token_ids"]);
    let ctx = 128;
    let tokens = &tokens[..(ctx * scale.ppl_chunks).min(tokens.len())];
    let got = perplexity(&mut common::reference_runner(be, ctx), tokens, ctx, ctx, |_, _| {}).unwrap();
    let want = perplexity(&mut common::reference_runner(Cpu::new(), ctx), tokens, ctx, ctx, |_, _| {}).unwrap();
    eprintln!("ctx {ctx}, {} chunks: wgpu PPL {:.4}, cpu {:.4}", got.n_chunks, got.ppl, want.ppl);
    assert!((got.ppl / want.ppl - 1.0).abs() < tol.ppl, "wgpu PPL {} vs cpu {}", got.ppl, want.ppl);
}
