//! Hostile and broken Hugging Face checkpoints: each gives a clear error naming what is wrong,
//! never a panic. The directories are copies of tests/data/hf/ ones with one thing broken.

mod common;

use std::path::{Path, PathBuf};

use ultra::Cpu;
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;

fn scratch(name: &str, from: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ultra-hf-bad-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(common::refs_dir().join("hf").join(from)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// A safetensors file: the 8-byte header length, the header, the data.
fn safetensors(header: &str, data_len: usize) -> Vec<u8> {
    [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), &vec![0u8; data_len]].concat()
}

/// The error of loading `dir` (as a model, so tensor checks run too), as text.
fn error_of(dir: &Path) -> String {
    let result = ultra::hf::open(dir, None).and_then(|g| Runner::load(Cpu::new(), &g, CacheLayout::plain(1, 8), 8));
    let message = match result {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    };
    let _ = std::fs::remove_dir_all(dir);
    message
}

fn assert_error(name: &str, from: &str, breakage: impl FnOnce(&Path), want: &[&str]) {
    let dir = scratch(name, from);
    breakage(&dir);
    let e = error_of(&dir);
    eprintln!("{name}: {e}");
    for w in want {
        assert!(e.contains(w), "{name}: `{e}` does not say `{w}`");
    }
}

/// A change to a JSON file.
type Edit = fn(&mut serde_json::Value);

fn write(dir: &Path, file: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(dir.join(file), bytes).unwrap();
}

fn edit_json(dir: &Path, file: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap();
    edit(&mut v);
    write(dir, file, v.to_string());
}

#[test]
fn hostile_safetensors_headers_are_refused() {
    let f32x2 = r#"{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#;
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("huge-header", [&(1u64 << 62).to_le_bytes()[..], b"{}"].concat(), "header"),
        ("header-past-end", [&1000u64.to_le_bytes()[..], b"{}"].concat(), "header"),
        ("offsets-past-end", safetensors(&format!(r#"{{"a":{f32x2}}}"#), 4), "covered"),
        (
            "overlap",
            safetensors(&format!(r#"{{"a":{f32x2},"b":{{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}}}"#), 12),
            "offset",
        ),
        (
            "length-mismatch",
            safetensors(r#"{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}"#, 8),
            "shape, data type",
        ),
        ("bad-json", safetensors(r#"{"a":"#, 0), "header"),
    ];
    for (name, bytes, want) in cases {
        assert_error(
            name,
            "qwen3-tiny",
            |d| write(d, "model.safetensors", &bytes),
            &["model.safetensors", "not a valid safetensors file", want],
        );
    }
}

#[test]
fn tensors_the_model_cannot_use_are_named() {
    let int = safetensors(r#"{"model.norm.weight":{"dtype":"I64","shape":[64],"data_offsets":[0,512]}}"#, 512);
    assert_error("int-dtype", "qwen3-tiny", |d| write(d, "model.safetensors", &int), &["model.norm.weight", "I64"]);
    let stray = safetensors(r#"{"model.layers.0.mystery.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, 8);
    assert_error(
        "unknown-name",
        "qwen3-tiny",
        |d| write(d, "model.safetensors", &stray),
        &["model.layers.0.mystery.weight"],
    );
    let three_d = safetensors(r#"{"model.norm.weight":{"dtype":"F32","shape":[2,2,2],"data_offsets":[0,32]}}"#, 32);
    assert_error("3-d", "qwen3-tiny", |d| write(d, "model.safetensors", &three_d), &["model.norm.weight", "[2, 2, 2]"]);
    // Tensors that contradict config.json: the key and the tensor are named.
    let layers = |c: &mut serde_json::Value| c["num_hidden_layers"] = 3.into();
    assert_error(
        "missing-layer",
        "qwen3-tiny",
        |d| edit_json(d, "config.json", layers),
        &["block_count = 3", "blk.2.attn_norm"],
    );
    let ffn = |c: &mut serde_json::Value| c["intermediate_size"] = 64.into();
    assert_error(
        "wrong-shape",
        "qwen3-tiny",
        |d| edit_json(d, "config.json", ffn),
        &["feed_forward_length = 64", "ffn_up", "128"],
    );
}

#[test]
fn broken_configs_are_refused_by_key() {
    assert_error(
        "config-not-json",
        "qwen3-tiny",
        |d| write(d, "config.json", "{\"model_type\": "),
        &["config.json", "not JSON"],
    );
    let cases: [(&str, Edit, &[&str]); 5] = [
        ("no-hidden-size", |c| drop(c.as_object_mut().unwrap().remove("hidden_size")), &["hidden_size", "missing"]),
        ("zero-layers", |c| c["num_hidden_layers"] = 0.into(), &["num_hidden_layers", "positive"]),
        ("model-type", |c| c["model_type"] = "mamba".into(), &["mamba", "not supported"]),
        ("rope-type", |c| c["rope_parameters"]["rope_type"] = "yarn".into(), &["yarn"]),
        ("heads-string", |c| c["num_attention_heads"] = "four".into(), &["num_attention_heads"]),
    ];
    for (name, edit, want) in cases {
        assert_error(name, "qwen3-tiny", |d| edit_json(d, "config.json", edit), want);
    }
    let softcap = |c: &mut serde_json::Value| c["final_logit_softcapping"] = 30.0.into();
    assert_error("softcap", "gemma3-tiny", |d| edit_json(d, "config.json", softcap), &["final_logit_softcapping"]);
    let pattern = |c: &mut serde_json::Value| c["layer_types"][0] = "full_attention".into();
    assert_error("layer-types", "gemma3-tiny", |d| edit_json(d, "config.json", pattern), &["layer_types"]);
}

#[test]
fn broken_shard_indexes_are_refused() {
    let first = "model-00001-of-00004.safetensors";
    let absent =
        |i: &mut serde_json::Value| i["weight_map"]["lm_head.weight"] = "model-00009-of-00009.safetensors".into();
    assert_error(
        "absent-shard",
        "llama-sharded",
        |d| edit_json(d, "model.safetensors.index.json", absent),
        &["model-00009-of-00009.safetensors", "not in the directory"],
    );
    let elsewhere = |i: &mut serde_json::Value| i["weight_map"]["lm_head.weight"] = first.into();
    assert_error(
        "wrong-shard",
        "llama-sharded",
        |d| edit_json(d, "model.safetensors.index.json", elsewhere),
        &["lm_head.weight", first, "does not hold it"],
    );
    // The index decides where a tensor lives: one it leaves out is not read, and an untied
    // model without its head is refused rather than run tied.
    let no_head = |i: &mut serde_json::Value| drop(i["weight_map"].as_object_mut().unwrap().remove("lm_head.weight"));
    assert_error(
        "no-head",
        "llama-sharded",
        |d| edit_json(d, "model.safetensors.index.json", no_head),
        &["lm_head.weight", "tie_word_embeddings"],
    );
    let escape = |i: &mut serde_json::Value| i["weight_map"]["lm_head.weight"] = "../model.safetensors".into();
    assert_error(
        "path-shard",
        "llama-sharded",
        |d| edit_json(d, "model.safetensors.index.json", escape),
        &["not a file name"],
    );
    assert_error(
        "index-not-json",
        "llama-sharded",
        |d| write(d, "model.safetensors.index.json", "[1,"),
        &["index", "not JSON"],
    );
    assert_error(
        "no-weights",
        "qwen3-tiny",
        |d| std::fs::remove_file(d.join("model.safetensors")).unwrap(),
        &["model.safetensors"],
    );
}

#[test]
fn broken_tokenizers_are_refused() {
    assert_error(
        "no-tokenizer",
        "qwen3-tiny",
        |d| std::fs::remove_file(d.join("tokenizer.json")).unwrap(),
        &["tokenizer.json", "missing"],
    );
    let unigram = |t: &mut serde_json::Value| t["model"]["type"] = "Unigram".into();
    assert_error("unigram", "qwen3-tiny", |d| edit_json(d, "tokenizer.json", unigram), &["Unigram"]);
    let id = |t: &mut serde_json::Value| t["added_tokens"][0]["id"] = 100000.into();
    assert_error("token-id", "qwen3-tiny", |d| edit_json(d, "tokenizer.json", id), &["100000"]);
    let pre = |t: &mut serde_json::Value| t["pre_tokenizer"] = serde_json::json!({"type": "Whitespace"});
    assert_error("pre-tokenizer", "qwen3-tiny", |d| edit_json(d, "tokenizer.json", pre), &["pre_tokenizer"]);
}
