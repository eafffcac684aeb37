//! SentencePiece rules on small hand-made vocabularies, where each rule shows alone: the leading
//! space (`add_space_prefix`, on by default, also after every special token), llama.cpp's default
//! special ids, byte fallback, unknown-token rendering, and clear errors on bad metadata.

use std::sync::Arc;

use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};
use ultra::tokenizer::{TokenType, Tokenizer, TokenizerKind};

/// `(text, type code, score)` of every token of the fixture vocabulary.
const VOCAB: &[(&str, i32, f32)] = &[
    ("<unk>", 2, 0.0),
    ("<s>", 3, 0.0),
    ("</s>", 3, 0.0),
    ("<0xC3>", 6, 0.0),
    ("<0xA9>", 6, 0.0),
    ("▁", 1, -1.0),
    ("a", 1, -2.0),
    ("b", 1, -3.0),
    ("▁a", 1, -4.0),
    ("ab", 1, -5.0),
    ("▁ab", 1, -6.0),
    ("<ctl>", 3, 0.0),
    ("<ud>", 4, 0.0),
    ("unused", 5, 0.0),
];

fn id(text: &str) -> u32 {
    VOCAB.iter().position(|(t, ..)| *t == text).unwrap() as u32
}

type Meta = Vec<(&'static str, Value)>;

fn fixture(edit: impl FnOnce(&mut Meta)) -> Gguf {
    let array = |ty, values: Vec<Value>| Value::Array(ty, values);
    let mut meta: Meta = vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", array(ValueType::String, VOCAB.iter().map(|t| Value::String(t.0.into())).collect())),
        ("tokenizer.ggml.token_type", array(ValueType::I32, VOCAB.iter().map(|t| Value::I32(t.1)).collect())),
        ("tokenizer.ggml.scores", array(ValueType::F32, VOCAB.iter().map(|t| Value::F32(t.2)).collect())),
    ];
    edit(&mut meta);
    let mut writer = GgufWriter::new();
    for (key, value) in meta {
        writer.meta(key, value);
    }
    Gguf::parse(Arc::new(writer.to_bytes())).expect("parse the fixture")
}

fn set(meta: &mut Meta, key: &'static str, value: Option<Value>) {
    meta.retain(|(k, _)| *k != key);
    meta.extend(value.map(|v| (key, v)));
}

fn tokenizer(edit: impl FnOnce(&mut Meta)) -> Tokenizer {
    Tokenizer::from_gguf(&fixture(edit)).expect("build the tokenizer")
}

fn error_of(edit: impl FnOnce(&mut Meta)) -> String {
    Tokenizer::from_gguf(&fixture(edit)).expect_err("the fixture should be refused").to_string()
}

#[test]
fn leading_space_at_the_start_and_after_special_tokens() {
    let tok = tokenizer(|_| {});
    assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
    assert!(tok.add_space_prefix(), "llama.cpp's default when the key is absent");
    assert_eq!(tok.encode("ab", true).unwrap(), [id("▁ab")]);
    assert_eq!(tok.decode(&[id("▁ab")]), b" ab", "the added space comes back, as llama.cpp renders it");
    assert_eq!(tok.encode("ab ab", true).unwrap(), [id("▁ab"), id("▁ab")]);
    // After a control token (parsed) the next text gets its own leading space.
    assert_eq!(tok.encode("<ctl>ab", true).unwrap(), [id("<ctl>"), id("▁ab")]);
    // A user-defined token matches even without parse_special, and counts as special there too.
    assert_eq!(tok.encode("a<ud>b", false).unwrap(), [id("▁a"), id("<ud>"), id("▁"), id("b")]);
    // Text of a control token is text without parse_special: `<`, `c`, ... are unknown here.
    let as_text = tok.encode("<ctl>", false).unwrap();
    assert!(as_text.len() > 1 && as_text.contains(&id("<unk>")), "{as_text:?}");
    assert!(tok.encode("", true).unwrap().is_empty(), "no lone ▁ for an empty text");

    let tok = tokenizer(|m| set(m, "tokenizer.ggml.add_space_prefix", Some(Value::Bool(false))));
    assert!(!tok.add_space_prefix());
    assert_eq!(tok.encode("ab", true).unwrap(), [id("ab")]);
    assert_eq!(tok.encode(" ab", true).unwrap(), [id("▁ab")]);
    assert_eq!(tok.decode(&tok.encode("ab ab", true).unwrap()), b"ab ab");
}

#[test]
fn default_special_ids_and_bos() {
    let tok = tokenizer(|_| {});
    let special = tok.special_ids();
    assert_eq!((special.bos, special.eos, special.unk), (Some(1), Some(2), Some(0)), "llama.cpp's defaults");
    assert!(tok.add_bos() && !tok.add_eos());
    assert_eq!(tok.encode_with_specials("ab", true).unwrap(), [1, id("▁ab")]);
    assert_eq!(tok.encode_with_specials("", true).unwrap(), [1]);
    assert_eq!(tok.eog_ids(), [2]);

    let tok = tokenizer(|m| {
        set(m, "tokenizer.ggml.bos_token_id", Some(Value::U32(11)));
        set(m, "tokenizer.ggml.add_bos_token", Some(Value::Bool(false)));
        set(m, "tokenizer.ggml.add_eos_token", Some(Value::Bool(true)));
    });
    assert_eq!(tok.special_ids().bos, Some(11));
    assert_eq!(tok.encode_with_specials("ab", true).unwrap(), [id("▁ab"), 2]);
}

#[test]
fn byte_fallback_and_rendering() {
    let tok = tokenizer(|_| {});
    // é is C3 A9, spelled by its byte tokens; `z` has neither a token nor a byte token: <unk>.
    assert_eq!(tok.encode("é", true).unwrap(), [id("▁"), id("<0xC3>"), id("<0xA9>")]);
    assert_eq!(tok.encode("z", true).unwrap(), [id("▁"), id("<unk>")]);
    assert_eq!(tok.token_bytes(id("<0xC3>")), [0xC3]);
    assert_eq!(tok.decode(&[id("<0xC3>"), id("<0xA9>")]), "é".as_bytes());
    assert_eq!(tok.token_bytes(id("<unk>")), b"<unk>");
    assert_eq!(tok.token_bytes(id("<ctl>")), b"<ctl>");
    assert_eq!(tok.token_bytes(id("<ud>")), b"<ud>");
    assert!(tok.token_bytes(id("unused")).is_empty());
    assert_eq!(tok.token_type(id("unused")), Some(TokenType::Unused));
    assert_eq!(tok.score(id("▁ab")), Some(-6.0));
    let mut stream = tok.stream_decoder();
    assert_eq!(stream.push(id("<0xC3>")), "");
    assert_eq!(stream.push(id("<0xA9>")), "é");
}

#[test]
fn bad_sentencepiece_metadata_is_a_clear_error() {
    let err = error_of(|m| set(m, "tokenizer.ggml.scores", None));
    assert!(err.contains("tokenizer.ggml.scores") && err.contains("SentencePiece"), "{err}");
    let err = error_of(|m| set(m, "tokenizer.ggml.scores", Some(Value::Array(ValueType::F32, vec![Value::F32(0.0)]))));
    assert!(err.contains("1 entries for 14 tokens"), "{err}");
    let err = error_of(|m| {
        let strings = VOCAB.iter().map(|_| Value::String("x".into())).collect();
        set(m, "tokenizer.ggml.scores", Some(Value::Array(ValueType::String, strings)))
    });
    assert!(err.contains("not a float"), "{err}");
    let err = error_of(|m| set(m, "tokenizer.ggml.scores", Some(Value::F32(1.0))));
    assert!(err.contains("not an array"), "{err}");
    let err = error_of(|m| {
        let types = VOCAB.iter().map(|t| Value::I32(if t.0 == "a" { 6 } else { t.1 })).collect();
        set(m, "tokenizer.ggml.token_type", Some(Value::Array(ValueType::I32, types)))
    });
    assert!(err.contains("BYTE") && err.contains("<0xNN>"), "{err}");
}
