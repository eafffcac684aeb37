//! Helpers shared by the integration tests: where the reference data and the model are.
//! Nothing here skips: a missing model or reference file fails the test that asked for it.
#![allow(dead_code)] // each test binary uses its own subset

pub mod rng;
pub mod suite;
pub mod tiny;

use std::path::PathBuf;

/// `$ULTRA_REFS`, else the reference data in the repository (`tests/data`).
pub fn refs_dir() -> PathBuf {
    match std::env::var_os("ULTRA_REFS").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")),
    }
}

/// The default model (SmolLM2-135M-Instruct Q4_1), fetched into the cache on first use.
pub fn model_path() -> PathBuf {
    ultra::fetch::default_model().unwrap_or_else(|e| panic!("the default model is needed for this test: {e}"))
}

/// Gemma 3 270M Q4_K_M (`gemma3-270m`), fetched into the cache on first use.
pub fn gemma3_path() -> PathBuf {
    let model = ultra::fetch::known("gemma3-270m").expect("gemma3-270m is a known model");
    model.ensure().unwrap_or_else(|e| panic!("gemma3-270m is needed for this test: {e}"))
}

/// A JSON file under [`refs_dir`], e.g. `load_json("smollm2/greedy.json")`.
pub fn load_json(rel: &str) -> serde_json::Value {
    let path = refs_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Bytes from a hex string (`"e29c93"`).
pub fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd-length hex {text:?}");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit")).collect()
}

/// A JSON array of numbers as token ids.
pub fn ids(value: &serde_json::Value) -> Vec<u32> {
    let list = value.as_array().unwrap_or_else(|| panic!("expected an id array, got {value}"));
    list.iter().map(|v| v.as_u64().expect("token id") as u32).collect()
}

/// A JSON array of numbers as f64.
pub fn floats(value: &serde_json::Value) -> Vec<f64> {
    value.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

/// Top-2 logit gap below which two correct engines may choose differently: llama.cpp against us
/// (tests/data/smollm2/README.md: 0.3 covers every near-tie seen; it quantizes activations to 8
/// bits and keeps an f16 KV cache) and the GPU backends' int8/f16 paths against the CPU.
pub const NEAR_TIE: f64 = 0.3;

/// (argmax, top-1 minus top-2) of a logit row; the first of equal maxima wins, and a repeated
/// maximum gives a gap of 0.
pub fn top2(row: &[f32]) -> (u32, f64) {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    let second = row.iter().enumerate().filter(|&(i, _)| i != best).map(|(_, &v)| v).fold(f32::MIN, f32::max);
    (best as u32, (row[best] - second) as f64)
}

/// The backend, or None after printing `SKIPPED: no <what> device: <reason>` past the test
/// harness's capture (a skip must be seen); with `require` (e.g. ULTRA_REQUIRE_CUDA) set to 1, a
/// missing device fails the test instead.
pub fn or_skip<B>(what: &str, require: &str, made: ultra::Result<B>) -> Option<B> {
    match made {
        Ok(b) => Some(b),
        Err(e) => {
            let msg = format!("SKIPPED: no {what} device: {e}");
            assert!(std::env::var(require).as_deref() != Ok("1"), "{msg}");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes());
            None
        }
    }
}

/// The cases of `smollm2/greedy.json`.
pub fn greedy_cases() -> Vec<serde_json::Value> {
    load_json("smollm2/greedy.json")["prompts"].as_array().expect("prompts").clone()
}

/// The reference model on `backend`, with a plain cache for two sequences of `context`.
pub fn reference_runner<B: ultra::Backend>(backend: B, context: usize) -> ultra::model::Runner<B> {
    let gguf = ultra::gguf::Gguf::open(&model_path()).expect("reference model loads");
    let layout = ultra::kv_cache::CacheLayout::plain(2, context);
    ultra::model::Runner::load(backend, &gguf, layout, context).expect("runner")
}

/// Feeds `prompt ++ generated[..n-1]` as one batch; row s holds the logits of step s (the logits
/// that chose `generated[s]`).
/// teacher_forced, but the prompt in one batch and then each generated token in a batch of its
/// own (the decode path: small-batch kernels such as the CPU's int8 GEMV or CUDA's).
pub fn teacher_forced_by_step<B: ultra::Backend>(
    runner: &mut ultra::model::Runner<B>,
    prompt: &[u32],
    generated: &[u32],
) -> Vec<Vec<f32>> {
    let seq = runner.cache.add_seq();
    let mut batch = ultra::model::Batch::new();
    for (pos, &t) in prompt.iter().enumerate() {
        batch.push(t, seq, pos, pos + 1 == prompt.len());
    }
    runner.forward(&batch).unwrap();
    let mut rows = vec![runner.logits(0).to_vec()];
    for (s, &t) in generated[..generated.len() - 1].iter().enumerate() {
        let mut batch = ultra::model::Batch::new();
        batch.push(t, seq, prompt.len() + s, true);
        runner.forward(&batch).unwrap();
        rows.push(runner.logits(0).to_vec());
    }
    runner.cache.remove_seq(seq).unwrap();
    rows
}

pub fn teacher_forced<B: ultra::Backend>(
    runner: &mut ultra::model::Runner<B>,
    prompt: &[u32],
    generated: &[u32],
) -> Vec<Vec<f32>> {
    let mut tokens = prompt.to_vec();
    tokens.extend_from_slice(&generated[..generated.len() - 1]);
    let seq = runner.cache.add_seq();
    let mut batch = ultra::model::Batch::new();
    for (pos, &t) in tokens.iter().enumerate() {
        batch.push(t, seq, pos, pos + 1 >= prompt.len());
    }
    runner.forward(&batch).unwrap();
    runner.cache.remove_seq(seq).unwrap();
    (0..generated.len()).map(|s| runner.logits(s).to_vec()).collect()
}
