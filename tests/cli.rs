//! The `ultra` binary end to end: each test runs the built executable the way a user would and
//! checks what it prints, what it exits with, and that bad input gives a clear error instead of
//! a panic. Every run is short (a few tokens, small contexts) so the file stays well under a
//! minute in release.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `ultra args…` and returns its output.
fn ultra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ultra")).args(args).output().expect("the ultra binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run succeeded and printed exactly one JSON object on stdout.
fn one_json(out: &Output) -> Value {
    assert!(out.status.success(), "ultra failed: {}", stderr(out));
    let text = stdout(out);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one JSON line, got:\n{text}");
    let value: Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {}", lines[0]));
    assert!(value.is_object(), "{value}");
    value
}

/// The run failed with a message on stderr and no panic.
fn clear_failure(out: &Output, must_mention: &str) -> String {
    let err = stderr(out);
    assert!(!out.status.success(), "expected a failure, got success:\n{}", stdout(out));
    assert!(!err.contains("panicked"), "panicked instead of reporting an error:\n{err}");
    assert!(
        err.to_lowercase().contains(&must_mention.to_lowercase()),
        "stderr does not mention `{must_mention}`:\n{err}"
    );
    err
}

/// A fresh path in this test binary's scratch folder.
fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{}-{name}", std::process::id()))
}

fn reference_case(name: &str) -> Value {
    let refs = common::load_json("smollm2/greedy.json");
    refs["prompts"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

#[test]
fn generate_json_is_one_object_with_the_documented_fields() {
    let v = one_json(&ultra(&["generate", "--prompt", "The capital of France is", "--max-tokens", "8", "--json"]));
    for field in [
        "prompt_tokens",
        "tokens",
        "text",
        "prefill_tok_s",
        "decode_tok_s",
        "cached_prompt_tokens",
        "target_forward_passes",
        "pages_allocated",
        "pages_freed",
        "pages_reused",
        "pages_in_use_at_end",
    ] {
        assert!(v.get(field).is_some(), "no `{field}` in {v}");
    }
    let tokens = v["tokens"].as_array().unwrap();
    assert!(!tokens.is_empty() && tokens.len() <= 8, "{v}");
    assert!(v["text"].is_string() && v["prefill_tok_s"].as_f64().unwrap() > 0.0);
    assert!(v.get("acceptance_rate").is_none(), "speculative fields without speculation: {v}");
}

#[test]
fn chat_json_reproduces_the_reference_prompt_ids() {
    let case = reference_case("pub_chat_capital");
    let text = case["prompt"].as_str().unwrap();
    // The user message between the template's markers.
    let user = text.split("<|im_start|>user\n").nth(1).unwrap().split("<|im_end|>").next().unwrap();
    let v = one_json(&ultra(&["generate", "--chat", "--prompt", user, "--max-tokens", "1", "--json"]));
    assert_eq!(common::ids(&v["prompt_tokens"]), common::ids(&case["prompt_ids"]));
}

#[test]
fn tokenize_json_parses_special_tokens_unless_told_not_to() {
    let special = one_json(&ultra(&["tokenize", "--text", "<|im_start|>user", "--json"]));
    let plain = one_json(&ultra(&["tokenize", "--text", "<|im_start|>user", "--no-special", "--json"]));
    let (special, plain) = (common::ids(&special["ids"]), common::ids(&plain["ids"]));
    assert_eq!(special, vec![1, 4093], "<|im_start|> is id 1 in SmolLM2");
    assert!(!plain.contains(&1) && plain.len() > special.len(), "{plain:?}");
}

/// A tiny random model (2 layers, 320 tokens), written once per test that asks.
fn tiny_model(name: &str) -> PathBuf {
    let path = scratch(name);
    let out = ultra(&["synth", "--preset", "tiny", "--type", "q4_0", "--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "synth: {}", stderr(&out));
    path
}

#[test]
fn gpu_backends_either_work_or_fail_clearly() {
    // The tiny model keeps this fast on software adapters (lavapipe) too.
    let model = tiny_model("gpu-tiny.gguf");
    for backend in ["wgpu", "cuda"] {
        let args = [
            "generate",
            "--model",
            model.to_str().unwrap(),
            "--backend",
            backend,
            "--prompt",
            "Hi",
            "--max-tokens",
            "2",
        ];
        let out = ultra(&[&args[..], &["--json"]].concat());
        if out.status.success() {
            one_json(&out);
        } else {
            clear_failure(&out, backend);
        }
    }
}

/// `--kv-type q8_0` runs on wgpu (or fails clearly where there is no adapter) and the cpu, which
/// has no q8_0 cache, refuses it with an error naming it.
#[test]
fn a_q8_0_cache_runs_on_wgpu_and_the_cpu_refuses_it_clearly() {
    let model = tiny_model("q8-cache-tiny.gguf");
    let run = |backend: &str| {
        let model = model.to_str().unwrap();
        ultra(&[
            "generate",
            "--model",
            model,
            "--backend",
            backend,
            "--kv-type",
            "q8_0",
            "--prompt",
            "Hi",
            "--max-tokens",
            "2",
            "--json",
        ])
    };
    clear_failure(&run("cpu"), "q8_0");
    let out = run("wgpu");
    if out.status.success() {
        one_json(&out);
    } else {
        clear_failure(&out, "wgpu");
    }
}

#[test]
fn an_unknown_backend_is_a_usage_error() {
    let out = ultra(&["generate", "--backend", "tpu", "--prompt", "Hi"]);
    assert_eq!(out.status.code(), Some(2), "clap exits with 2 on usage errors");
    clear_failure(&out, "invalid value 'tpu'");
}

#[test]
fn a_prompt_longer_than_the_context_is_a_clear_error() {
    let long = "one two three four five six seven eight nine ten ".repeat(10);
    let out = ultra(&["generate", "--ctx", "16", "--prompt", &long, "--max-tokens", "4"]);
    clear_failure(&out, "context");
}

#[test]
fn a_malformed_gguf_is_a_clear_error_naming_the_problem() {
    let real = std::fs::read(common::model_path()).unwrap();
    let cases =
        [("truncated.gguf", real[..4096].to_vec()), ("garbage.gguf", b"this is not a model file at all".to_vec())];
    for (name, bytes) in cases {
        let path = scratch(name);
        std::fs::write(&path, bytes).unwrap();
        let out = ultra(&["generate", "--model", path.to_str().unwrap(), "--prompt", "Hi", "--max-tokens", "2"]);
        let err = clear_failure(&out, "GGUF");
        assert!(err.contains(name), "the message should name the file:\n{err}");
    }
}

#[test]
fn perplexity_json_has_the_documented_fields() {
    let path = scratch("ppl.txt");
    let text = "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. ";
    std::fs::write(&path, text.repeat(4)).unwrap();
    let v = one_json(&ultra(&["perplexity", "--file", path.to_str().unwrap(), "--ctx", "32", "--json"]));
    for field in ["ppl", "ppl_stderr", "n_chunks", "tokens_scored"] {
        assert!(v.get(field).is_some(), "no `{field}` in {v}");
    }
    assert!(v["n_chunks"].as_u64().unwrap() >= 2 && v["ppl"].as_f64().unwrap() > 1.0, "{v}");
}

#[test]
fn synth_tiny_then_info_and_bench_on_it() {
    let path = tiny_model("tiny.gguf");
    let model = path.to_str().unwrap();
    let info = ultra(&["info", "--model", model]);
    assert!(info.status.success(), "info: {}", stderr(&info));
    assert!(stdout(&info).contains("2 layers"), "{}", stdout(&info));
    let v = one_json(&ultra(&["bench", "--model", model, "-p", "16", "-n", "8", "-r", "1", "--json"]));
    assert_eq!((v["prompt_tokens"].as_u64(), v["gen_tokens"].as_u64()), (Some(16), Some(8)), "{v}");
    assert!(
        v["prefill_tok_s"]["median"].as_f64().unwrap() > 0.0 && v["decode_tok_s"]["median"].as_f64().unwrap() > 0.0
    );
    let (bytes, gb_s) = (v["decode_weight_bytes"].as_f64().unwrap(), v["decode_weight_gb_s"].as_f64().unwrap());
    let expected = bytes * v["decode_tok_s"]["median"].as_f64().unwrap() / 1e9;
    assert!(bytes > 0.0 && (gb_s - expected).abs() <= 1e-9 * expected, "{v}");
    let v =
        one_json(&ultra(&["bench", "--model", model, "-p", "16", "-n", "4", "-r", "1", "--batch", "1,2", "--json"]));
    let points = v["batch"]["points"].as_array().unwrap();
    assert_eq!(points.iter().map(|p| p["batch"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2], "{v}");
    let args = ["bench", "--model", model, "-n", "4", "-r", "1", "--draft-mode", "lookup,self", "--speculate", "1-2"];
    let v = one_json(&ultra(&[&args[..], &["--draft-layers", "1", "--json"]].concat()));
    let spec = &v["speculative"];
    let names: Vec<&str> = spec["prompts"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(names.contains(&"pub_long_repetitive_400"), "{names:?}");
    let points = spec["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "two drafters × k = 1, 2: {spec}");
    for p in points {
        for field in ["acceptance_rate", "mean_accepted_len", "speedup"] {
            assert!(p[field]["median"].is_number(), "no `{field}` in {p}");
        }
        assert_eq!(p["matches_plain"], true, "greedy speculation changed the tokens: {p}");
    }
}

#[test]
fn bench_lists_reject_zero_and_garbage() {
    for args in [["bench", "--batch", "0"], ["bench", "--speculate", "two"]] {
        let out = ultra(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        clear_failure(&out, "count");
    }
}

#[test]
fn prompts_file_prints_one_object_per_prompt_then_a_summary() {
    let path = scratch("prompts.jsonl");
    let lines = [
        r#"{"prompt": "The capital of France is"}"#,
        r#"{"prompt": "Line one\nLine two"}"#,
        r#"{"prompt": "1, 2, 3,"}"#,
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let out = ultra(&["generate", "--prompts-file", path.to_str().unwrap(), "--max-tokens", "4", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let values: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (summary, per_prompt) = values.split_last().unwrap();
    let mut indices: Vec<u64> = per_prompt.iter().map(|v| v["index"].as_u64().unwrap()).collect();
    indices.sort();
    assert_eq!(indices, vec![0, 1, 2]);
    assert!(per_prompt.iter().all(|v| v["tokens"].is_array() && v["text"].is_string()));
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["prompts"], 3);
}

#[test]
fn the_paged_cache_reuses_a_shared_prefix_for_the_later_prompt() {
    let base = reference_case("pub_long_repetitive_400")["prompt"].as_str().unwrap().to_string();
    let prefix: String = base.chars().take(600).collect();
    let path = scratch("shared.jsonl");
    let line = |p: String| serde_json::json!({ "prompt": p }).to_string();
    std::fs::write(
        &path,
        [line(format!("{prefix} First ending.")), line(format!("{prefix} A second, different ending."))].join("\n"),
    )
    .unwrap();
    let out = ultra(&[
        "generate",
        "--prompts-file",
        path.to_str().unwrap(),
        "--paged-cache",
        "--max-batch",
        "1",
        "--max-tokens",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let values: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_index = |i: u64| values.iter().find(|v| v["index"] == i).unwrap();
    assert_eq!(by_index(0)["cached_prompt_tokens"], 0);
    assert!(by_index(1)["cached_prompt_tokens"].as_u64().unwrap() > 0, "{}", by_index(1));
}

#[test]
fn lookup_speculation_reports_its_figures_and_changes_no_token() {
    let prompt = "one two three four one two three four one two three four one two";
    let args = ["generate", "--prompt", prompt, "--max-tokens", "12", "--json"];
    let plain = one_json(&ultra(&args));
    let spec = one_json(&ultra(&[&args[..], &["--draft-mode", "lookup", "--speculate", "4"]].concat()));
    for field in ["acceptance_rate", "mean_accepted_len", "drafted", "accepted"] {
        assert!(spec.get(field).is_some(), "no `{field}` in {spec}");
    }
    assert!(spec["drafted"].as_u64().unwrap() > 0, "{spec}");
    assert_eq!(spec["tokens"], plain["tokens"], "greedy speculation must emit the plain tokens");
}
