//! Replays every committed fuzz input through the harness the cargo-fuzz targets run
//! (`fuzz/harness.rs`): the minimized corpus (`fuzz/corpus/<target>/`) and each reproducer of a
//! bug the fuzzer found (`fuzz/regressions/<target>/`, named after the bug). A panic names the
//! file. `write_seeds` (ignored) writes the inputs the corpus was grown from (README "Fuzzing").

mod common;

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

use ultra::Format;
use ultra::gguf::{GgufWriter, Value, ValueType};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn replay(target: &str, run: fn(&[u8])) {
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else { continue };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("readable corpus entry").path()).collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if std::panic::catch_unwind(|| run(&bytes)).is_err() {
                panic!("fuzz input {} fails (see the panic above)", path.display());
            }
            n += 1;
        }
    }
    assert!(n > 0, "no committed inputs for fuzz target {target}");
}

#[test]
fn gguf_inputs() {
    replay("gguf", harness::gguf);
}

#[test]
fn safetensors_inputs() {
    replay("safetensors", harness::safetensors);
}

#[test]
fn bpe_inputs() {
    replay("bpe", harness::bpe);
}

#[test]
fn spm_inputs() {
    replay("spm", harness::spm);
}

#[test]
fn chat_template_inputs() {
    replay("chat_template", harness::chat_template);
}

// ---- seeds ----

fn strings(list: impl IntoIterator<Item = String>) -> Value {
    Value::Array(ValueType::String, list.into_iter().map(Value::String).collect())
}

fn i32s(list: impl IntoIterator<Item = i32>) -> Value {
    Value::Array(ValueType::I32, list.into_iter().map(Value::I32).collect())
}

const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}\
                      {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A byte-level BPE vocabulary (the 256 byte characters, a few merges, ChatML markup): 261 tokens.
fn bpe_vocab(w: &mut GgufWriter) -> usize {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| ultra::tokenizer::bytes::byte_to_char(b).to_string()).collect();
    tokens.extend(["Ġa", "ab", "<|im_start|>", "<|im_end|>", "<|endoftext|>"].map(String::from));
    let types = (0..tokens.len()).map(|i| if i >= 258 { 3 } else { 1 });
    w.meta("tokenizer.ggml.model", Value::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", Value::String("smollm".into()))
        .meta("tokenizer.ggml.token_type", i32s(types))
        .meta("tokenizer.ggml.merges", strings(["Ġ a", "a b"].map(String::from)))
        .meta("tokenizer.ggml.eos_token_id", Value::U32(259))
        .meta("tokenizer.chat_template", Value::String(CHATML.into()));
    let n = tokens.len();
    w.meta("tokenizer.ggml.tokens", strings(tokens));
    n
}

/// A SentencePiece vocabulary (unk, bos, eos, the 256 byte tokens, a few pieces): 266 tokens.
fn spm_vocab(w: &mut GgufWriter) -> usize {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    for piece in ["▁", "a", "b", "▁a", "ab", "▁ab", "\n\n"] {
        tokens.push(piece.into());
        types.push(if piece == "\n\n" { 4 } else { 1 });
    }
    let scores = (0..tokens.len()).map(|i| Value::F32(-(i as f32)));
    let n = tokens.len();
    w.meta("tokenizer.ggml.model", Value::String("llama".into()))
        .meta("tokenizer.ggml.tokens", strings(tokens))
        .meta("tokenizer.ggml.token_type", i32s(types))
        .meta("tokenizer.ggml.scores", Value::Array(ValueType::F32, scores.collect()))
        .meta("tokenizer.ggml.add_space_prefix", Value::Bool(true));
    n
}

/// Deterministic weights in `format`, small enough that the quantized values stay finite.
fn weights(format: Format, rows: usize, cols: usize, seed: usize) -> Vec<u8> {
    let values: Vec<f32> =
        (0..rows * cols).map(|i| (((i * 7919 + seed * 104729) % 2001) as f32 - 1000.0) * 1e-4).collect();
    let mut bytes = Vec::new();
    ultra::quant::quantize_row(format, &values, &mut bytes);
    bytes
}

/// A model of 1-2 layers, d_model 32 and d_ff 256 (so `ffn_down`'s rows are one k-quant
/// super-block), with every tensor its architecture needs: `attn` is the format of the attention
/// and gate/up matrices, `down` that of `ffn_down`; norms stay F32.
fn tiny_model(arch: &str, attn: Format, down: Format, spm: bool) -> Vec<u8> {
    let (n_layers, d, ff, n_heads, n_kv) = (if arch == "gemma3" { 2 } else { 1 }, 32, 256, 2, 1);
    let (hd, kv) = (d / n_heads, d / n_heads * n_kv);
    let mut w = GgufWriter::new();
    let vocab = if spm { spm_vocab(&mut w) } else { bpe_vocab(&mut w) };
    let key = |k: &str| format!("{arch}.{k}");
    w.meta("general.architecture", Value::String(arch.into()))
        .meta(&key("block_count"), Value::U32(n_layers))
        .meta(&key("context_length"), Value::U32(64))
        .meta(&key("embedding_length"), Value::U32(d as u32))
        .meta(&key("feed_forward_length"), Value::U32(ff as u32))
        .meta(&key("attention.head_count"), Value::U32(n_heads as u32))
        .meta(&key("attention.head_count_kv"), Value::U32(n_kv as u32))
        .meta(&key("rope.freq_base"), Value::F32(10000.0))
        .meta(&key("attention.layer_norm_rms_epsilon"), Value::F32(1e-6));
    if arch == "gemma3" {
        w.meta("gemma3.attention.sliding_window", Value::U32(4));
    }
    let mut seed = 0;
    let mut matrix = |w: &mut GgufWriter, name: &str, format: Format, rows: usize, cols: usize| {
        seed += 1;
        w.tensor(name, format, rows, cols, weights(format, rows, cols, seed));
    };
    let norm = |w: &mut GgufWriter, name: &str, len: usize| {
        w.tensor(name, Format::F32, 1, len, (0..len).flat_map(|i| (1.0 + i as f32 * 1e-3).to_le_bytes()).collect());
    };
    matrix(&mut w, "token_embd.weight", attn, vocab, d);
    for i in 0..n_layers {
        let n = |x: &str| format!("blk.{i}.{x}.weight");
        norm(&mut w, &n("attn_norm"), d);
        matrix(&mut w, &n("attn_q"), attn, d, d);
        matrix(&mut w, &n("attn_k"), attn, kv, d);
        matrix(&mut w, &n("attn_v"), attn, kv, d);
        matrix(&mut w, &n("attn_output"), attn, d, d);
        if arch == "qwen2" {
            for (name, len) in [("attn_q", d), ("attn_k", kv), ("attn_v", kv)] {
                norm(&mut w, &format!("blk.{i}.{name}.bias"), len);
            }
        }
        if arch == "qwen3" || arch == "gemma3" {
            norm(&mut w, &n("attn_q_norm"), hd);
            norm(&mut w, &n("attn_k_norm"), hd);
        }
        if arch == "gemma3" {
            norm(&mut w, &n("post_attention_norm"), d);
            norm(&mut w, &n("post_ffw_norm"), d);
        }
        norm(&mut w, &n("ffn_norm"), d);
        matrix(&mut w, &n("ffn_gate"), attn, ff, d);
        matrix(&mut w, &n("ffn_up"), attn, ff, d);
        matrix(&mut w, &n("ffn_down"), down, d, ff);
    }
    norm(&mut w, "output_norm.weight", d);
    if arch != "gemma3" {
        matrix(&mut w, "output.weight", attn, vocab, d);
    }
    w.to_bytes()
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = fuzz_dir().join("corpus-work").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
}

/// Writes the seed inputs into `fuzz/corpus-work/<target>/` (not committed): tiny models of every
/// architecture and weight format with both vocabulary kinds, the reference tokenizer texts, and
/// the real models' chat templates. `cargo test --release --test fuzz_regressions -- --ignored`.
#[test]
#[ignore]
fn write_seeds() {
    use Format::*;
    for (arch, attn, down, spm) in [
        ("llama", Q4_0, Q4_K, false),
        ("llama", Q8_0, Q2_K, true),
        ("qwen2", Q5_0, Q6_K, false),
        ("qwen3", F16, Q5_K, false),
        ("gemma3", Q4_1, Q3_K, true),
        ("llama", Q5_1, Q6_K, false),
        ("llama", BF16, Q4_K, true),
    ] {
        write("gguf", &format!("{arch}-{}-{}", attn.name(), down.name()), &tiny_model(arch, attn, down, spm));
    }
    let mut w = GgufWriter::new();
    spm_vocab(&mut w);
    write("gguf", "spm-vocab", &w.to_bytes());
    let mut w = GgufWriter::new();
    bpe_vocab(&mut w);
    write("gguf", "bpe-vocab", &w.to_bytes());

    let texts = |file: &str| -> Vec<Vec<u8>> {
        let cases = common::load_json(file)["cases"].as_array().expect("cases").clone();
        cases.iter().map(|c| common::hex(c["text_hex"].as_str().expect("text_hex"))).collect()
    };
    for (target, file, variants) in [("bpe", "smollm2/tokenize.json", 4u8), ("spm", "gemma3/tokenize.json", 2)] {
        for (i, text) in texts(file).iter().enumerate().filter(|(i, _)| target == "bpe" || i % 6 == 0) {
            let head = (i as u8 % variants) << 1 | (i as u8 / variants) & 1;
            write(target, &format!("case-{i}"), &[&[head][..], text].concat());
        }
    }

    let mut templates = vec![CHATML.to_string()];
    for model in ["smollm2-135m", "gemma3-270m"] {
        let path = ultra::fetch::known(model).unwrap().ensure().unwrap();
        let g = ultra::gguf::Gguf::open(&path).unwrap();
        templates.extend(g.get("tokenizer.chat_template").and_then(Value::as_str).map(String::from));
    }
    templates.push(
        "{{ raise_exception('no') if messages | length > 3 }}{{ strftime_now('%d %b %Y') }}\
                    {% for k, v in {'a': 1}.items() %}{{ k.upper() ~ v }}{% endfor %}\
                    {{ messages[0].content.strip('x').split(',') | join('-') }}"
            .into(),
    );
    for (i, t) in templates.iter().enumerate() {
        let input = format!("{t}\0You are terse.\0Hi, there\0Hello!\0 bye ");
        write("chat_template", &format!("template-{i}"), input.as_bytes());
    }
}
