//! What each fuzz target does with one input, shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/*.rs`) and the regression tests that replay the committed corpus and
//! crash reproducers (`tests/fuzz_regressions.rs`), so a reproducer runs exactly the code that
//! found it. Uses only `ultra` and std. A function returning means the input passed; any panic
//! (an `assert!` on a stated contract included) is a finding.
#![allow(dead_code)] // each includer uses its own subset

use std::sync::{Arc, OnceLock};

use ultra::gguf::{Gguf, GgufWriter, Value};
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Config, Runner};
use ultra::tokenizer::{ChatMessage, Tokenizer, render_chat_template};
use ultra::{Cpu, quant};

/// Tensor bytes above which a parsed file is not loaded and run (keeps every input fast).
const MAX_MODEL_BYTES: u64 = 1 << 20;
/// Texts the `gguf` target encodes with any tokenizer a file builds.
const TEXTS: [&str; 4] = ["", "Hello, world!", " a  b\n\n\tc 123 é😀 <|im_start|><s>", "▁x<0x41>"];

/// The GGUF reader on arbitrary bytes, then everything a loader does with a file that parses:
/// metadata display, every tensor's bytes and first rows dequantized, the tokenizer (encode,
/// decode, chat template) and, for a model of at most `MAX_MODEL_BYTES`, a forward pass of a
/// few tokens on the CPU. Contract: `Ok` or `Err` at every step, never a panic.
pub fn gguf(data: &[u8]) {
    let Ok(g) = Gguf::parse(Arc::new(data.to_vec())) else { return };
    for (key, value) in &g.metadata {
        let _ = format!("{key} = {value}");
    }
    for t in &g.tensors {
        let bytes = g.tensor_bytes(t);
        let bytes = bytes.bytes();
        assert_eq!(bytes.len() as u64, t.n_bytes, "{}", t.name);
        let (Ok(format), cols) = (t.format(), t.cols()) else { continue };
        if let Ok(row_bytes) = format.row_bytes(cols)
            && cols <= 1 << 16
        {
            let mut out = vec![0f32; cols];
            for row in bytes.chunks_exact(row_bytes).take(2) {
                quant::dequantize_row(format, row, &mut out);
            }
        }
    }
    if let Ok(tok) = Tokenizer::from_gguf(&g) {
        for text in TEXTS {
            for parse_special in [false, true] {
                let ids = tok.encode_with_specials(text, parse_special).expect("built-in patterns never fail");
                let _ = tok.decode_lossy(&ids);
            }
        }
        let _ = tok.decode_lossy(&[0, 1, u32::MAX, tok.vocab_size() as u32]);
        let _ = tok.apply_chat_template(&[ChatMessage::user("hi")], true);
    }
    run_model(&g);
}

/// Loads a parsed model on the CPU when it is small and runs a few tokens. Contract: `Ok` or
/// `Err`, never a panic; an id outside the vocabulary is refused.
fn run_model(g: &Gguf) {
    let Ok(config) = Config::from_gguf(g) else { return };
    if g.tensors.iter().map(|t| t.n_bytes).sum::<u64>() > MAX_MODEL_BYTES {
        return;
    }
    let Ok(mut runner) = Runner::load(Cpu::new(), g, CacheLayout::plain(1, 8), 8) else { return };
    let seq = runner.cache.add_seq();
    let vocab = config.vocab_size as u32; // ≥ 1: token_embd has a row per token
    // Two prompt tokens, then one decode step; an id outside the vocabulary must be refused.
    let _ = runner.forward(&Batch::sequence(seq, 0, &[0, vocab - 1], true));
    let _ = runner.forward(&Batch::sequence(seq, 2, &[vocab / 2], false));
    assert!(runner.forward(&Batch::sequence(seq, 3, &[vocab], false)).is_err(), "id {vocab} of {vocab} accepted");
}

/// The `config.json`s the `safetensors` target pairs its input with (its first byte picks one):
/// one tiny shape (hidden 8, FFN 16, one layer, 2 heads and 1 KV head of 4, vocabulary 16) per
/// architecture, so that a file holding that model's tensor names loads and runs.
pub const HF_CONFIGS: [&str; 4] = [
    r#"{"model_type":"llama","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"vocab_size":16,"max_position_embeddings":64,"tie_word_embeddings":false,"rope_parameters":{"rope_type":"llama3","rope_theta":10000.0,"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":32}}"#,
    r#"{"model_type":"qwen2","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"vocab_size":16,"max_position_embeddings":64}"#,
    r#"{"model_type":"qwen3","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":16,"max_position_embeddings":64,"tie_word_embeddings":true}"#,
    r#"{"model_type":"gemma3_text","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":16,"max_position_embeddings":64,"sliding_window":4,"query_pre_attn_scalar":4}"#,
];

/// A Hugging Face checkpoint on arbitrary bytes: the first byte picks a `config.json` of
/// `HF_CONFIGS`, the rest is the `model.safetensors` file. Parsed (header, offsets, dtypes,
/// shapes), named and converted (llama's q/k permutation, Gemma's 1 + w), every tensor's bytes
/// read, and a model that loads runs a few tokens. Contract: `Ok` or `Err`, never a panic.
pub fn safetensors(data: &[u8]) {
    let Some((&pick, file)) = data.split_first() else { return };
    let Ok(g) = ultra::hf::from_bytes(HF_CONFIGS[pick as usize % HF_CONFIGS.len()], file.to_vec()) else { return };
    for t in &g.tensors {
        let bytes = g.tensor_bytes(t);
        assert_eq!(bytes.bytes().len() as u64, t.n_bytes, "{}", t.name);
        if let Ok(format) = t.format()
            && let Ok(row_bytes) = format.row_bytes(t.cols())
            && t.cols() <= 1 << 16
        {
            let mut out = vec![0f32; t.cols()];
            for row in bytes.bytes().chunks_exact(row_bytes).take(2) {
                quant::dequantize_row(format, row, &mut out);
            }
        }
    }
    run_model(&g);
}

/// The real vocabularies (SmolLM2's byte-level BPE, Gemma 3's SentencePiece), fetched into the
/// model cache on first use, each with variants of its settings: the BPE vocabulary under every
/// pre-tokenizer it makes sense with, the SentencePiece one with and without `add_space_prefix`.
fn variants(model: &str, key: &str, values: &[Value]) -> Vec<Tokenizer> {
    let known = ultra::fetch::known(model).expect("a known model");
    let path = known.ensure().unwrap_or_else(|e| panic!("the {model} vocabulary is needed: {e}"));
    let file = Gguf::open(&path).expect("the cached model parses");
    values
        .iter()
        .map(|value| {
            let mut w = GgufWriter::new();
            for (k, v) in file.metadata.iter().filter(|(k, _)| k.starts_with("tokenizer.") && k != key) {
                w.meta(k, v.clone());
            }
            w.meta(key, value.clone());
            let g = Gguf::parse(Arc::new(w.to_bytes())).expect("a vocabulary-only file parses");
            Tokenizer::from_gguf(&g).expect("the real vocabulary builds")
        })
        .collect()
}

fn bpe_tokenizers() -> &'static [Tokenizer] {
    static TOKS: OnceLock<Vec<Tokenizer>> = OnceLock::new();
    let pres = ["smollm", "gpt2", "llama3", "default"].map(|p| Value::String(p.into()));
    TOKS.get_or_init(|| variants("smollm2-135m", "tokenizer.ggml.pre", &pres))
}

fn spm_tokenizers() -> &'static [Tokenizer] {
    static TOKS: OnceLock<Vec<Tokenizer>> = OnceLock::new();
    TOKS.get_or_init(|| {
        variants("gemma3-270m", "tokenizer.ggml.add_space_prefix", &[Value::Bool(false), Value::Bool(true)])
    })
}

/// Input layout of the tokenizer targets: byte 0 picks the variant and `parse_special`; the rest
/// is the text (invalid UTF-8 replaced by U+FFFD, so every input is a text).
fn split_input<'t>(data: &[u8], toks: &'t [Tokenizer]) -> Option<(&'t Tokenizer, bool, String)> {
    let (&head, text) = data.split_first()?;
    let tok = &toks[(head >> 1) as usize % toks.len()];
    Some((tok, head & 1 == 1, String::from_utf8_lossy(text).into_owned()))
}

/// Streaming the ids gives the lossy text of their bytes.
fn check_stream(tok: &Tokenizer, ids: &[u32], bytes: &[u8]) {
    let mut stream = tok.stream_decoder();
    let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
    streamed.push_str(&stream.flush());
    assert_eq!(streamed, String::from_utf8_lossy(bytes), "stream decoder");
}

/// Byte-level BPE on any text. Contract: `decode(encode(text, parse_special))` is `text`, byte
/// for byte, less the bytes the vocabulary has no token for, for every text and both
/// `parse_special`: merges only join tokens and control tokens decode to their text. (SmolLM2
/// lacks a few control bytes, 0x06 among them; llama.cpp drops them too.) Also: the stream
/// decoder agrees.
pub fn bpe(data: &[u8]) {
    let Some((tok, parse_special, text)) = split_input(data, bpe_tokenizers()) else { return };
    let ids = tok.encode(&text, parse_special).expect("built-in patterns never fail");
    let bytes = tok.decode(&ids);
    let has_token = |b: &u8| tok.id_of(&ultra::tokenizer::bytes::byte_to_char(*b).to_string()).is_some();
    let want: Vec<u8> = text.bytes().filter(has_token).collect();
    assert!(bytes == want, "{text:?} decodes as {:?}", String::from_utf8_lossy(&bytes));
    check_stream(tok, &ids, &bytes);
}

/// SentencePiece on any text. Contract: without `add_space_prefix`,
/// `decode(encode(text)) == text` with each `▁` read as a space (SentencePiece writes a space as
/// `▁`, so they are one token); every character the vocabulary lacks falls back to byte tokens.
/// With `add_space_prefix`, decoding may add a space where a text fragment starts (the start and
/// after each special token) and nothing else: the decoded text without spaces equals the input
/// without spaces, with at most one more space than there are special tokens, plus one.
pub fn spm(data: &[u8]) {
    let Some((tok, parse_special, text)) = split_input(data, spm_tokenizers()) else { return };
    let ids = tok.encode(&text, parse_special).expect("SentencePiece encoding never fails");
    let bytes = tok.decode(&ids);
    let want = text.replace('▁', " ");
    let got = String::from_utf8_lossy(&bytes);
    if tok.add_space_prefix() {
        let strip = |s: &str| s.replace(' ', "");
        assert_eq!(strip(&got), strip(&want), "{text:?} (add_space_prefix)");
        let specials = ids.iter().filter(|&&id| tok.token_type(id).is_some_and(is_special)).count();
        let (got_spaces, want_spaces) = (got.matches(' ').count(), want.matches(' ').count());
        assert!(got_spaces >= want_spaces, "{text:?}: decoding lost spaces");
        let added = got_spaces - want_spaces;
        assert!(added <= specials + 1, "{text:?}: {added} spaces added around {specials} special tokens");
    } else {
        assert!(bytes == want.as_bytes(), "{text:?} decodes as {got:?}");
    }
    check_stream(tok, &ids, &bytes);
}

fn is_special(ty: ultra::tokenizer::TokenType) -> bool {
    use ultra::tokenizer::TokenType::{Control, UserDefined};
    matches!(ty, Control | UserDefined)
}

/// The chat-template renderer on an arbitrary template. Input layout: the template source up to
/// the first NUL byte, then NUL-separated message contents (roles cycle system, user, assistant);
/// byte 0's low bit is `add_generation_prompt`. Contract: `Ok` or `Err`, never a panic or a hang.
pub fn chat_template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or_default();
    let roles = ["system", "user", "assistant"];
    let messages: Vec<ChatMessage> =
        parts.enumerate().map(|(i, content)| ChatMessage::new(roles[i % 3], content)).collect();
    let add_generation_prompt = data.first().is_some_and(|b| b & 1 == 1);
    let _ = render_chat_template(source, &messages, add_generation_prompt, "<s>", "</s>");
}
