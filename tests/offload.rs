//! Layer offload (`--gpu-layers`, `--gpu-memory`): streamed layers must give logits bit-identical
//! to the fully resident model on each GPU backend (wgpu here on lavapipe, cuda on a GPU; each
//! skips loudly without its device, and fails under ULTRA_REQUIRE_WGPU=1 / ULTRA_REQUIRE_CUDA=1),
//! across ring depths, budgets, prefill, decode and (cuda) replayed graphs; and the errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ultra::Backend;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Footprint, Placement, Runner};

const CONTEXT: usize = 64;

/// A synthetic model of 4 layers (tiny-256: d_model 256) in `weights`, written once per process.
fn synth(weights: &str, cell: &'static OnceLock<PathBuf>) -> PathBuf {
    cell.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("ultra-offload-{weights}-{}.gguf", std::process::id()));
        let w = ultra::model::synth::WeightType::parse(weights).expect("a weight type");
        ultra::model::synth::synth_gguf("llama", "tiny-256", w, 3, &path).expect("synth");
        path
    })
    .clone()
}

/// One format throughout (Q8_0): one layer layout, one ring.
fn model_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    synth("q8_0", &PATH)
}

/// A k-quant mix (Q4_K_M): layers 2 and 3 keep attn_v and ffn_down in Q6_K, so two layouts stream
/// through two rings.
fn mixed_model_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    synth("q4_k_m", &PATH)
}

/// Prefill logits of every prompt row, then those of 8 greedy decode steps, as bits.
fn run<B: Backend>(backend: B, gguf: &Gguf, placement: &Placement) -> (Vec<u32>, u64, (usize, usize)) {
    let mut r = Runner::load_placed(backend, gguf, CacheLayout::plain(1, CONTEXT), CONTEXT, placement).unwrap();
    let vocab = r.config().vocab_size;
    let seq = r.cache.add_seq();
    let prompt: Vec<u32> = (0..11).map(|i| (i * 37 + 5) % vocab as u32).collect();
    r.forward(&Batch::sequence(seq, 0, &prompt, true)).unwrap();
    let mut bits: Vec<u32> = (0..prompt.len()).flat_map(|i| r.logits(i).iter().map(|v| v.to_bits())).collect();
    let mut next = common::top2(r.logits(prompt.len() - 1)).0;
    for pos in prompt.len()..prompt.len() + 8 {
        r.forward(&Batch::sequence(seq, pos, &[next], true)).unwrap();
        bits.extend(r.logits(0).iter().map(|v| v.to_bits()));
        next = common::top2(r.logits(0)).0;
    }
    (bits, r.bytes_streamed, r.model.weights.resident_and_streamed())
}

/// Every placement below matches the resident run bit for bit, and streams what it says.
fn streamed_matches_resident<B: Backend>(model: &Path, make: impl Fn() -> B) {
    let gguf = Gguf::open(model).unwrap();
    let n = ultra::model::Config::from_gguf(&gguf).unwrap().n_layers;
    let (want, streamed, counts) = run(make(), &gguf, &Placement::all());
    assert_eq!((streamed, counts), (0, (n, 0)));
    let foot = Footprint::of(&gguf, &ultra::model::Config::from_gguf(&gguf).unwrap(), CacheLayout::plain(1, CONTEXT));
    // A budget for the fixed part, the cache, one resident layer and a ring of two (with two
    // layouts, rings of one: two rings of two would hold every layer).
    let budget = if foot.layouts == 1 { foot.need(1, 2) } else { foot.need(0, 1) };
    let by_budget = foot.place(None, Some(budget), 2).unwrap();
    let resident = by_budget.resident.expect("the budget streams some layers");
    assert!(foot.need(resident, by_budget.prefetch) <= budget, "{by_budget:?}");
    if foot.layouts == 1 {
        assert_eq!(by_budget, Placement { resident: Some(1), prefetch: 2 });
    }
    let cases = [
        Placement { resident: Some(0), prefetch: 1 },
        Placement { resident: Some(0), prefetch: 2 },
        Placement { resident: Some(1), prefetch: 4 },
        Placement { resident: Some(n - 1), prefetch: 2 },
        Placement { resident: Some(0), prefetch: 16 }, // deeper than the streamed layers
        by_budget,
    ];
    for p in cases {
        let (got, streamed, (resident, n_streamed)) = run(make(), &gguf, &p);
        assert_eq!(resident, p.resident.unwrap(), "{p:?}");
        assert_eq!(resident + n_streamed, n);
        assert!(streamed > 0, "{p:?} streamed nothing");
        let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "{p:?}: {differ} of {} logits differ from the resident run", want.len());
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_streamed_layers_match_resident() {
    let made = || ultra::Wgpu::new();
    if common::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", made()).is_none() {
        return;
    }
    streamed_matches_resident(&model_path(), || made().unwrap());
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_streamed_k_quant_mix_matches_resident() {
    let made = || ultra::Wgpu::new();
    if common::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", made()).is_none() {
        return;
    }
    streamed_mix_matches_resident(|| made().unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_streamed_layers_match_resident() {
    let made = || ultra::Cuda::new(0);
    if common::or_skip("cuda", "ULTRA_REQUIRE_CUDA", made()).is_none() {
        return;
    }
    streamed_matches_resident(&model_path(), || made().unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_streamed_k_quant_mix_matches_resident() {
    let made = || ultra::Cuda::new(0);
    if common::or_skip("cuda", "ULTRA_REQUIRE_CUDA", made()).is_none() {
        return;
    }
    streamed_mix_matches_resident(|| made().unwrap());
}

/// The mix has two layer layouts (so two rings), and streams bit-identically through them.
fn streamed_mix_matches_resident<B: Backend>(make: impl Fn() -> B) {
    let model = mixed_model_path();
    let gguf = Gguf::open(&model).unwrap();
    let cfg = ultra::model::Config::from_gguf(&gguf).unwrap();
    assert_eq!(
        Footprint::of(&gguf, &cfg, CacheLayout::plain(1, CONTEXT)).layouts,
        2,
        "Q4_K_M of 4 layers: two layer layouts"
    );
    streamed_matches_resident(&model, make);
}

/// The footprint counts the KV cache at its element's size: f16 half of f32, q8_0 its rows' words
/// (17 / 64 of f32 where kv_dim is a multiple of 64: 1.0625 bytes a value), and twice the slots twice.
#[test]
fn footprint_counts_the_cache_at_its_element_size() {
    use ultra::backend::DType;
    let gguf = Gguf::open(&model_path()).unwrap();
    let cfg = ultra::model::Config::from_gguf(&gguf).unwrap();
    let kv = |dtype, slots| Footprint::of(&gguf, &cfg, CacheLayout::plain(1, slots).with_kv_dtype(dtype)).kv_cache;
    let f32_bytes = (cfg.n_layers * 2 * CONTEXT * cfg.kv_dim() * 4) as u64;
    assert_eq!(kv(DType::F32, CONTEXT), f32_bytes);
    assert_eq!(kv(DType::F16, CONTEXT), f32_bytes / 2);
    let q8_row = (cfg.kv_dim() / 4 + cfg.kv_dim().div_ceil(64)) * 4;
    assert_eq!(kv(DType::Q8_0, CONTEXT), (cfg.n_layers * 2 * CONTEXT * q8_row) as u64);
    if cfg.kv_dim().is_multiple_of(64) {
        assert_eq!(kv(DType::Q8_0, CONTEXT) * 64, f32_bytes * 17);
    }
    assert_eq!(kv(DType::F16, 2 * CONTEXT), f32_bytes);
}

#[test]
fn cpu_refuses_streaming_clearly() {
    let gguf = Gguf::open(&model_path()).unwrap();
    let p = Placement { resident: Some(1), prefetch: 2 };
    let e = Runner::load_placed(ultra::Cpu::new(), &gguf, CacheLayout::plain(1, 8), 8, &p).err().expect("refused");
    assert!(e.to_string().contains("streamed layers"), "{e}");
}

/// The `ultra` binary: cargo's, or on PATH where the tests run away from the build (the GPU machine).
fn ultra(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let built = Path::new(env!("CARGO_BIN_EXE_ultra"));
    let mut c = Command::new(if built.exists() { built } else { Path::new("ultra") });
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the ultra binary runs")
}

fn generate_json(model: &Path, backend: &str, extra: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let m = model.to_str().unwrap();
    let mut args = vec!["generate", "--model", m, "--backend", backend, "--prompt", "abc", "--max-tokens", "6"];
    args.extend_from_slice(&["--json", "--ctx", "64"]);
    args.extend_from_slice(extra);
    let out = ultra(&args, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ultra {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `generate --json` reports the placement, and a budget too small for one layer and the cache
/// fails with the budget and the need in the message.
fn cli_reports_and_refuses(backend: &str, env: &[(&str, &str)]) -> Vec<u32> {
    let model = model_path();
    let resident = generate_json(&model, backend, &[], env);
    assert_eq!((resident["layers_streamed"].as_u64(), resident["bytes_streamed"].as_u64()), (Some(0), Some(0)));
    let streamed = generate_json(&model, backend, &["--gpu-layers", "1", "--prefetch", "2"], env);
    assert_eq!((streamed["layers_resident"].as_u64(), streamed["layers_streamed"].as_u64()), (Some(1), Some(3)));
    assert!(streamed["bytes_streamed"].as_u64().unwrap() > 0);
    assert_eq!(streamed["tokens"], resident["tokens"]);
    let m = model.to_str().unwrap();
    let out = ultra(&["generate", "--model", m, "--backend", backend, "--prompt", "a", "--gpu-memory", "10KB"], env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 10 KB budget was accepted");
    assert!(stderr.contains("--gpu-memory 10.00 KB is too small") && stderr.contains("need"), "{stderr}");
    let out = ultra(&["generate", "--model", m, "--backend", backend, "--prompt", "a", "--gpu-memory", "10XB"], env);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not a size"));
    common::ids(&streamed["tokens"])
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_cli_reports_and_refuses() {
    if common::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::new()).is_none() {
        return;
    }
    cli_reports_and_refuses("wgpu", &[]);
}

/// Also with page-locked memory refused: a warning, then the same tokens from pageable memory.
#[cfg(feature = "cuda")]
#[test]
fn cuda_cli_reports_and_refuses_and_falls_back_to_pageable() {
    if common::or_skip("cuda", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0)).is_none() {
        return;
    }
    let pinned = cli_reports_and_refuses("cuda", &[]);
    let pageable = cli_reports_and_refuses("cuda", &[("ULTRA_CUDA_PINNED", "0")]);
    assert_eq!(pinned, pageable);
    let m = model_path();
    let args = ["generate", "--model", m.to_str().unwrap(), "--backend", "cuda", "--prompt", "a", "--gpu-layers", "0"];
    let out = ultra(&args, &[("ULTRA_CUDA_PINNED", "0")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("warning: cuda: page-locked host memory"), "{stderr}");
}
