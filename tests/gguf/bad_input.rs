//! Bad model files named clearly, each with its exact message: k-quant rows that are not whole
//! super-blocks, a truncated super-block, an unknown architecture, a SentencePiece vocabulary
//! without scores, and metadata that contradicts the tensor shapes. Then seeded corruption of
//! k-quant model files (`ultra synth --type q4_k_m`, with its byte-level BPE vocabulary and with a
//! SentencePiece one) through everything a loader does: parse, config, tokenizer, weights on the
//! CPU and a forward pass. Ok or Err, never a panic.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ultra::Cpu;
use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};
use ultra::kv_cache::CacheLayout;
use ultra::model::synth::{WeightType, synth_gguf};
use ultra::model::{Batch, Config, Runner};
use ultra::tokenizer::Tokenizer;

use super::fuzz::{Rng, mutate};
use super::{malformed, parse, raw_file};

/// `ultra synth --preset tiny-256 --type <weights>`, read back (rows of 256 and 512 values).
fn synth(weights: &str) -> Vec<u8> {
    // Tests run in parallel: each call writes its own file.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let name = format!("ultra-bad-input-{weights}-{}-{call}.gguf", std::process::id());
    let path: PathBuf = std::env::temp_dir().join(name);
    synth_gguf("llama", "tiny-256", WeightType::parse(weights).unwrap(), 7, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

/// `bytes` written again with `edits` applied to the metadata (`None` removes the key).
fn rewrite(bytes: &[u8], edits: &[(&str, Option<Value>)]) -> Vec<u8> {
    let g = parse(bytes.to_vec()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata.iter().filter(|(k, _)| edits.iter().all(|(e, _)| e != k)) {
        w.meta(k, v.clone());
    }
    for (k, v) in edits {
        if let Some(v) = v {
            w.meta(k, v.clone());
        }
    }
    for t in &g.tensors {
        w.raw_tensor(&t.name, t.dims.clone(), t.type_id, g.tensor_bytes(t).bytes().to_vec());
    }
    w.to_bytes()
}

fn load_error(bytes: Vec<u8>) -> String {
    let g = parse(bytes).unwrap();
    match Runner::load(Cpu::new(), &g, CacheLayout::plain(1, 16), 16) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn kquant_rows_must_be_whole_super_blocks() {
    for (id, name) in [(10, "Q2_K"), (11, "Q3_K"), (12, "Q4_K"), (13, "Q5_K"), (14, "Q6_K")] {
        let b = raw_file(vec![("blk.0.ffn_down.weight", vec![128, 4], id, 1024)]);
        let reason = format!(
            "tensor `blk.0.ffn_down.weight` [128, 4] {name}: row length 128 is not a multiple of the block size 256"
        );
        malformed(b, &reason);
    }
    let err = ultra::Format::Q4_K.row_bytes(300).unwrap_err().to_string();
    assert_eq!(err, "invalid argument: Q4_K rows hold whole blocks of 256 values; 300 is not a multiple");
    assert!(GgufWriter::new().declare_tensor("t", ultra::Format::Q6_K, 2, 384).is_err());
}

#[test]
fn a_truncated_super_block_is_named() {
    // Two Q6_K super-blocks (2 × 210 bytes), the file cut one byte short of the second's end.
    let mut b = raw_file(vec![("blk.0.ffn_down.weight", vec![256, 2], 14, 420)]);
    let data_offset = parse(b.clone()).unwrap().data_offset as usize;
    b.truncate(data_offset + 419);
    let offset = malformed(
        b,
        "tensor `blk.0.ffn_down.weight` (420 bytes at data offset 0) runs past the end of the file (419 data bytes)",
    );
    assert_eq!(offset, data_offset as u64);
    // A real k-quant mix cut inside its last tensor (output.weight, Q6_K in q4_k_m).
    let mut b = synth("q4_k_m");
    b.truncate(b.len() - 100);
    malformed(b, "tensor `output.weight` (");
}

#[test]
fn an_unknown_or_missing_architecture_is_named() {
    let b = synth("q4_k_m");
    let mamba = rewrite(&b, &[("general.architecture", Some(Value::String("mamba".into())))]);
    assert_eq!(
        load_error(mamba),
        "model metadata: architecture `mamba` is not supported (llama, qwen2, qwen3, gemma3 are)"
    );
    assert_eq!(
        load_error(rewrite(&b, &[("general.architecture", None)])),
        "model metadata: general.architecture is missing"
    );
    let number = rewrite(&b, &[("general.architecture", Some(Value::U32(1)))]);
    assert_eq!(load_error(number), "model metadata: general.architecture = 1 is not a string");
}

/// A SentencePiece vocabulary of 5 tokens with scores, as metadata.
fn spm_vocab() -> Vec<(&'static str, Value)> {
    let tokens = ["<unk>", "<s>", "</s>", "▁a", "a"].map(|t| Value::String(t.into())).to_vec();
    let scores = (0..5).map(|i| Value::F32(-(i as f32))).collect();
    vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", Value::Array(ValueType::String, tokens)),
        ("tokenizer.ggml.scores", Value::Array(ValueType::F32, scores)),
    ]
}

fn tokenizer_error(meta: Vec<(&str, Value)>) -> String {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.meta(k, v);
    }
    let g = Gguf::parse(Arc::new(w.to_bytes())).unwrap();
    match Tokenizer::from_gguf(&g) {
        Ok(_) => panic!("the tokenizer built"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_sentencepiece_vocabulary_needs_its_scores() {
    let with_scores = |scores: Option<Value>| {
        let mut meta = spm_vocab();
        meta.retain(|(k, _)| *k != "tokenizer.ggml.scores");
        meta.extend(scores.map(|s| ("tokenizer.ggml.scores", s)));
        tokenizer_error(meta)
    };
    assert_eq!(
        with_scores(None),
        "tokenizer: a SentencePiece (`llama`) vocabulary needs tokenizer.ggml.scores; the GGUF has none"
    );
    let three = Value::Array(ValueType::F32, vec![Value::F32(0.0); 3]);
    assert_eq!(with_scores(Some(three)), "tokenizer: tokenizer.ggml.scores has 3 entries for 5 tokens");
    let ints = Value::Array(ValueType::I32, vec![Value::I32(0); 5]);
    assert_eq!(with_scores(Some(ints)), "tokenizer: tokenizer.ggml.scores[0] is not a float");
    assert_eq!(with_scores(Some(Value::F32(0.0))), "tokenizer: tokenizer.ggml.scores is not an array");
    // With its scores the same vocabulary builds.
    let mut w = GgufWriter::new();
    for (k, v) in spm_vocab() {
        w.meta(k, v);
    }
    Tokenizer::from_gguf(&Gguf::parse(Arc::new(w.to_bytes())).unwrap()).unwrap();
}

#[test]
fn metadata_that_contradicts_the_tensors_names_the_key() {
    // tiny-256: d_model 256, 4 heads and 2 kv heads of 64, d_ff 512, 4 layers, 320 tokens.
    let b = synth("q4_k_m");
    let set = |key: &str, v: u32| load_error(rewrite(&b, &[(key, Some(Value::U32(v)))]));
    assert_eq!(
        set("llama.embedding_length", 512),
        "model metadata: llama.embedding_length = 512, but the file's `token_embd.weight` has rows of 256"
    );
    assert_eq!(
        set("llama.attention.head_count", 2),
        "model metadata: llama.attention.head_count = 2, llama.attention.head_count_kv = 2 and a head size of \
         128 (llama.embedding_length / head_count) make 256 query and 256 key rows, but the file's \
         `blk.0.attn_q.weight` has 256 and `blk.0.attn_k.weight` 128"
    );
    assert_eq!(
        set("llama.attention.head_count_kv", 1),
        "model metadata: llama.attention.head_count = 4, llama.attention.head_count_kv = 1 and a head size of \
         64 (llama.embedding_length / head_count) make 256 query and 64 key rows, but the file's \
         `blk.0.attn_q.weight` has 256 and `blk.0.attn_k.weight` 128"
    );
    assert_eq!(
        set("llama.attention.key_length", 128),
        "model metadata: llama.attention.head_count = 4, llama.attention.head_count_kv = 2 and a head size of \
         128 (llama.attention.key_length) make 512 query and 256 key rows, but the file's \
         `blk.0.attn_q.weight` has 256 and `blk.0.attn_k.weight` 128"
    );
    assert_eq!(
        set("llama.vocab_size", 1000),
        "model metadata: the vocabulary has 1000 tokens (llama.vocab_size), but the file's `token_embd.weight` has 320 rows"
    );
    assert_eq!(
        set("llama.feed_forward_length", 1024),
        "model metadata: llama.feed_forward_length = 1024, but the file's `blk.0.ffn_up.weight` has 512 rows"
    );
    assert_eq!(
        set("llama.block_count", 5),
        "model metadata: llama.block_count = 5, but the file has no `blk.4.attn_norm.weight`"
    );
    assert_eq!(
        set("llama.block_count", 1_000_000),
        "model metadata: llama.block_count = 1000000, but the file has only 39 tensors"
    );
}

/// A SentencePiece vocabulary of `n` tokens: unk, bos, eos, the 256 byte tokens, then pieces.
fn spm_meta(n: usize) -> Vec<(&'static str, Value)> {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let pieces = ["▁", "a", "b", "▁a", "ab", "▁ab", "é", "\n\n", "<start_of_turn>"];
    for i in 0..n - tokens.len() {
        tokens.push(pieces.get(i).map_or(format!("▁p{i}"), |p| p.to_string()));
        types.push(match pieces.get(i) {
            Some(&"\n\n") => 4,
            Some(&"<start_of_turn>") => 3,
            _ => 1,
        });
    }
    let scores = (0..n).map(|i| Value::F32(-(i as f32) / 8.0)).collect();
    vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", Value::Array(ValueType::String, tokens.into_iter().map(Value::String).collect())),
        ("tokenizer.ggml.token_type", Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect())),
        ("tokenizer.ggml.scores", Value::Array(ValueType::F32, scores)),
    ]
}

/// Everything a loader does with a file, on the CPU. Ok or Err at each step, never a panic.
fn exercise(bytes: Vec<u8>) -> &'static str {
    let Ok(g) = parse(bytes) else { return "refused by the reader" };
    if let Ok(tok) = Tokenizer::from_gguf(&g) {
        let ids = tok.encode_with_specials("Hello <start_of_turn> wörld\n\n", true).unwrap();
        let _ = tok.decode_lossy(&ids);
    }
    let Ok(config) = Config::from_gguf(&g) else { return "refused by the config" };
    let Ok(mut runner) = Runner::load(Cpu::new(), &g, CacheLayout::plain(1, 8), 8) else {
        return "refused by the loader";
    };
    let seq = runner.cache.add_seq();
    let vocab = config.vocab_size as u32;
    let ran = runner.forward(&Batch::sequence(seq, 0, &[1, vocab - 1], true));
    assert!(runner.forward(&Batch::sequence(seq, 2, &[vocab], false)).is_err(), "id {vocab} of {vocab} accepted");
    if ran.is_ok() { "loaded and ran" } else { "refused by the forward pass" }
}

#[test]
fn seeded_corruption_of_kquant_models_never_panics() {
    let bpe = synth("q4_k_m");
    let spm = {
        let mut edits: Vec<(&str, Option<Value>)> = spm_meta(320).into_iter().map(|(k, v)| (k, Some(v))).collect();
        edits.extend([("tokenizer.ggml.merges", None), ("tokenizer.ggml.pre", None)]);
        rewrite(&synth("q3_k_m"), &edits)
    };
    for base in [&bpe, &spm] {
        assert_eq!(exercise(base.clone()), "loaded and ran");
    }
    let data_offsets = [&bpe, &spm].map(|b| parse(b.clone()).unwrap().data_offset as usize);
    // About 1 ms a case in release: no need to cut the count under CI.
    let cases = 4000;
    let mut outcomes = std::collections::BTreeMap::new();
    for seed in 0..cases as u64 {
        let mut rng = Rng(seed ^ 0x6b71);
        let (base, data_offset) = if seed % 2 == 0 { (&bpe, data_offsets[0]) } else { (&spm, data_offsets[1]) };
        // Three cases in four corrupt the header (metadata and tensor infos), the rest any byte.
        let bytes = if seed % 4 < 3 {
            let (head, data) = base.split_at(data_offset);
            [mutate(&mut rng, head.to_vec()), data.to_vec()].concat()
        } else {
            mutate(&mut rng, base.clone())
        };
        *outcomes.entry(exercise(bytes)).or_insert(0) += 1;
    }
    eprintln!("{cases} corrupted k-quant models: {outcomes:?}");
    assert!(outcomes.get("loaded and ran").is_some_and(|&n| n > cases / 10), "{outcomes:?}");
}
