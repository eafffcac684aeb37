//! Tiny random-weight Qwen3 and Llama 3 checkpoints made with transformers and converted to GGUF
//! as llama.cpp's converter does (tests/data/tiny/: make_tiny.py, README.md): qwen3's q/k norms and
//! a head size that is not d_model / n_heads, Llama 3's rope scaling as the `rope_freqs` tensor with
//! q/k rows in GGML's order. The engine's logits at every position of three sequences must match
//! transformers' float64 ones, and its greedy decoding transformers' greedy tokens.

mod common;

use std::sync::Arc;

use ultra::Cpu;
use ultra::generate::decode::{GenerateOptions, generate};
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::gguf::{Gguf, GgufWriter};
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Config, Runner};
use ultra::tokenizer::Tokenizer;

use common::{floats, ids, load_json, refs_dir};

/// Max |Δ logit| against the float64 reference. The engine computes in float32: dot products of
/// at most 128 terms over two layers, logits of order 3, so errors are of order 1e-6 (README.md
/// has the measured figure); transformers' own float32 run lands at the same order.
const LOGIT_TOL: f64 = 1e-4;

/// Greedy tokens are compared up to the first step whose top-2 gap is below this: ten times the
/// logit tolerance, so both sides' choices are decided by more than their errors.
const TIE: f64 = 1e-3;

fn reference(model: &str) -> serde_json::Value {
    load_json("tiny/reference.json")["models"][model].clone()
}

fn open(model: &str) -> Gguf {
    let file = reference(model)["file"].as_str().unwrap().to_string();
    Gguf::open(&refs_dir().join("tiny").join(file)).unwrap()
}

/// The largest |Δ| between the engine's logits and the reference's, over every position of every
/// sequence.
fn max_logit_diff(g: &Gguf, refs: &serde_json::Value) -> f64 {
    let mut runner = Runner::load(Cpu::exact(), g, CacheLayout::plain(1, 128), 128).unwrap();
    let mut worst = 0f64;
    for s in refs["sequences"].as_array().unwrap() {
        let tokens = ids(&s["ids"]);
        let seq = runner.cache.add_seq();
        runner.forward(&Batch::sequence(seq, 0, &tokens, true)).unwrap();
        for (pos, want) in s["logits"].as_array().unwrap().iter().enumerate() {
            for (got, want) in runner.logits(pos).iter().zip(floats(want)) {
                worst = worst.max((*got as f64 - want).abs());
            }
        }
        runner.cache.remove_seq(seq).unwrap();
    }
    worst
}

#[test]
fn the_tiny_checkpoints_load_with_their_settings() {
    let qwen = open("qwen3");
    let c = Config::from_gguf(&qwen).unwrap();
    assert_eq!((c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.q_dim()), (64, 4, 2, 32, 128));
    assert!(c.qk_norm && qwen.tensor("output.weight").is_none(), "q/k norms, tied output");
    let llama = open("llama3");
    let c = Config::from_gguf(&llama).unwrap();
    assert_eq!((c.head_dim, c.rope.freq_scale, c.rope.theta), (16, 1.0, 1e4));
    assert!(llama.tensor("rope_freqs.weight").is_some() && llama.tensor("output.weight").is_some());
    for g in [&qwen, &llama] {
        let tok = Tokenizer::from_gguf(g).unwrap();
        assert_eq!(tok.vocab_size(), 275);
        assert_eq!(tok.decode(&tok.encode("the cat sat", false).unwrap()), b"the cat sat");
    }
}

#[test]
fn logits_match_transformers_at_every_position() {
    for model in ["qwen3", "llama3"] {
        let worst = max_logit_diff(&open(model), &reference(model));
        eprintln!("{model}: max |Δ logit| {worst:.2e} vs transformers float64");
        assert!(worst < LOGIT_TOL, "{model}: max |Δ logit| {worst:.2e} (tolerance {LOGIT_TOL})");
    }
}

#[test]
fn greedy_decoding_matches_transformers() {
    for model in ["qwen3", "llama3"] {
        let (g, refs) = (open(model), &reference(model)["greedy"]);
        let (prompt, want, gaps) = (ids(&refs["prompt_ids"]), ids(&refs["tokens"]), floats(&refs["top2_gap"]));
        let mut runner = Runner::load(Cpu::exact(), &g, CacheLayout::plain(1, 128), 128).unwrap();
        let seq = runner.cache.add_seq();
        let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
        let opts = GenerateOptions { max_tokens: want.len(), prefill_chunk: 5, eog: Vec::new() };
        let got = generate(&mut runner, seq, &prompt, &mut sampler, &opts, |_| Ok(())).unwrap().tokens;
        let decided = gaps.iter().position(|&gap| gap < TIE).unwrap_or(gaps.len());
        assert!(decided >= 16, "{model}: a near-tie at step {decided}");
        assert_eq!(got[..decided], want[..decided], "{model}: greedy tokens");
    }
}

/// The test can see the scaling: without `rope_freqs` the engine lands far outside the tolerance.
#[test]
fn llama3_without_its_rope_freqs_misses_the_reference() {
    let g = open("llama3");
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata.iter() {
        w.meta(k, v.clone());
    }
    for t in g.tensors.iter().filter(|t| t.name != "rope_freqs.weight") {
        w.raw_tensor(&t.name, t.dims.clone(), t.type_id, g.tensor_bytes(t).bytes().to_vec());
    }
    let unscaled = Gguf::parse(Arc::new(w.to_bytes())).unwrap();
    let worst = max_logit_diff(&unscaled, &reference("llama3"));
    eprintln!("llama3 without rope_freqs: max |Δ logit| {worst:.3}");
    assert!(worst > 100.0 * LOGIT_TOL, "max |Δ logit| {worst:.2e} without rope_freqs");
}
