//! The SentencePiece tokenizer on Gemma 3 270M's vocabulary against tests/data/gemma3/tokenize.json
//! (Hugging Face `tokenizers` and the `sentencepiece` library, built from the same GGUF; see its
//! README): ids with and without special-token parsing, decoding, streaming, BOS, and the CLI.
//! The model is fetched through the project's own fetch code into `$ULTRA_CACHE`.

mod common;

use std::process::Command;
use std::sync::OnceLock;

use ultra::gguf::Gguf;
use ultra::tokenizer::{TokenType, Tokenizer, TokenizerKind};

use common::{hex, ids, load_json};

fn gemma3() -> &'static ultra::fetch::KnownModel {
    ultra::fetch::known("gemma3-270m").expect("gemma3-270m is a known model")
}

fn tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let path = common::gemma3_path();
        Tokenizer::from_gguf(&Gguf::open(&path).expect("open gemma3")).expect("build the tokenizer")
    })
}

fn refs() -> &'static serde_json::Value {
    static REFS: OnceLock<serde_json::Value> = OnceLock::new();
    REFS.get_or_init(|| load_json("gemma3/tokenize.json"))
}

fn cases() -> &'static [serde_json::Value] {
    refs()["cases"].as_array().expect("cases")
}

fn text_of(case: &serde_json::Value) -> String {
    let text = case["text"].as_str().expect("text").to_string();
    assert_eq!(text.as_bytes(), hex(case["text_hex"].as_str().unwrap()), "{}: text_hex", case["name"]);
    text
}

/// The reference ids of a case: SentencePiece's where Hugging Face's conversion differs from it
/// (runs of more than 31 spaces: see the README), else Hugging Face's, which then equal
/// SentencePiece's.
fn expected(case: &serde_json::Value, suffix: &str) -> Vec<u32> {
    let sp = &case[format!("sentencepiece_ids_{suffix}")];
    if sp.is_null() { ids(&case[format!("ids_{suffix}")]) } else { ids(sp) }
}

#[test]
fn gemma3_vocabulary_metadata() {
    let tok = tokenizer();
    let vocab = &refs()["vocab"];
    assert_eq!(refs()["model"]["sha256"], gemma3().sha256, "the data was made from this very file");
    assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
    assert_eq!(tok.vocab_size() as u64, vocab["size"].as_u64().unwrap());
    let special = tok.special_ids();
    let id = |key: &str| vocab[key].as_u64().map(|v| v as u32);
    assert_eq!((special.bos, special.eos, special.unk, special.pad), (id("bos"), id("eos"), id("unk"), id("pad")));
    assert_eq!(tok.add_bos(), vocab["add_bos_token"].as_bool().unwrap());
    assert_eq!(tok.add_eos(), vocab["add_eos_token"].as_bool().unwrap());
    assert_eq!(tok.add_space_prefix(), vocab["add_space_prefix"].as_bool().unwrap());
    assert!(tok.pre_tokenizer().is_none() && tok.n_merges() == 0);
    // eos, and `<end_of_turn>` found by its text as llama.cpp does.
    assert_eq!(tok.eog_ids(), [1, 106]);
    assert_eq!(special.eot, Some(106));
    let counts = vocab["counts_by_type"].as_object().unwrap();
    for (code, ty) in
        [("1", TokenType::Normal), ("3", TokenType::Control), ("4", TokenType::UserDefined), ("6", TokenType::Byte)]
    {
        let n = (0..tok.vocab_size() as u32).filter(|&i| tok.token_type(i) == Some(ty)).count();
        assert_eq!(n as u64, counts[code].as_u64().unwrap(), "tokens of type {ty:?}");
    }
    assert_eq!(tok.id_of("<start_of_turn>"), Some(105));
    assert_eq!(tok.id_of("▁world").and_then(|i| tok.token_bytes(i).strip_prefix(b" ")), Some(&b"world"[..]));
    assert_eq!(tok.token_bytes(tok.id_of("<0x0A>").unwrap()), b"\n");
    assert!(tok.score(tok.id_of("▁the").unwrap()).is_some_and(f32::is_finite));
    assert!(tok.token_bytes(u32::MAX).is_empty());
}

#[test]
fn tokenize_cases_match_the_references() {
    let tok = tokenizer();
    assert!(cases().len() >= 40);
    let mut differing = Vec::new();
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let text = text_of(case);
        for (parse_special, suffix) in [(true, "parse_special"), (false, "no_parse_special")] {
            let want = expected(case, suffix);
            let got = tok.encode(&text, parse_special).unwrap();
            assert_eq!(got, want, "{name}: ids_{suffix}");
            if !case[format!("sentencepiece_ids_{suffix}")].is_null() {
                differing.push(format!("{name}/{suffix}"));
            }
            // Lossless: the text comes back byte for byte (add_space_prefix is false).
            assert_eq!(tok.decode(&got), text.as_bytes(), "{name}: decode of ids_{suffix}");
            let hf_ids = ids(&case[format!("ids_{suffix}")]);
            assert_eq!(tok.decode(&hf_ids), hex(case[format!("decoded_{suffix}_hex")].as_str().unwrap()), "{name}");
            // generate and perplexity add BOS, as the file asks.
            let with_bos = tok.encode_with_specials(&text, parse_special).unwrap();
            assert_eq!(with_bos[0], 2, "{name}: BOS first");
            assert_eq!(with_bos[1..], got[..], "{name}: BOS, then the text");
        }
    }
    // Only the long space runs part the two references; anything else would be a data change.
    let expected_differing: Vec<String> = ["spaces_32", "spaces_40", "spaces_100_word"]
        .iter()
        .flat_map(|n| [format!("{n}/parse_special"), format!("{n}/no_parse_special")])
        .collect();
    assert_eq!(differing, expected_differing);
}

#[test]
fn special_token_rules() {
    let tok = tokenizer();
    // Control tokens match only with parse_special; user-defined ones (newlines, space runs,
    // `<table>`) match either way.
    assert_eq!(tok.encode("<start_of_turn>", true).unwrap(), [105]);
    assert!(tok.encode("<start_of_turn>", false).unwrap().len() > 1);
    for parse_special in [true, false] {
        assert_eq!(tok.encode("\n\n", parse_special).unwrap(), [108]);
        assert_eq!(tok.encode("  ", parse_special).unwrap(), [138]);
        assert_eq!(tok.encode("<table>", parse_special).unwrap(), [168]);
        assert!(tok.encode("", parse_special).unwrap().is_empty());
    }
}

#[test]
fn decoding_arbitrary_ids_matches_hugging_face() {
    let tok = tokenizer();
    let cases = refs()["decode"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let want = hex(case["text_hex"].as_str().unwrap());
        let got = ids(&case["ids"]);
        assert_eq!(tok.decode(&got), want, "decode of {got:?}");
        let mut stream = tok.stream_decoder();
        let mut streamed: String = got.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.flush());
        assert_eq!(streamed.as_bytes(), want, "streamed decode of {got:?}");
    }
}

#[test]
fn streaming_holds_back_byte_fallback_characters() {
    let tok = tokenizer();
    let case = cases().iter().find(|c| c["name"] == "byte_fallback_rare").unwrap();
    let text = text_of(case);
    let got = tok.encode(&text, true).unwrap();
    let mut stream = tok.stream_decoder();
    let (mut out, mut held) = (String::new(), 0);
    for &id in &got {
        let piece = stream.push(id);
        assert!(!piece.contains('\u{FFFD}'), "a replacement character mid-stream");
        held += usize::from(!stream.pending_bytes().is_empty());
        out.push_str(&piece);
    }
    assert!(held > 0, "characters spelled by <0xNN> tokens come in several pieces");
    assert!(stream.flush().is_empty());
    assert_eq!(out, text);
}

#[test]
fn long_and_hostile_texts_round_trip() {
    let tok = tokenizer();
    let texts = [
        " ".repeat(100_000),
        "\n".repeat(10_000) + "x",
        "ab ".repeat(50_000),
        "\u{1F600}\u{20000}\u{E000}".repeat(5_000),
        "<start_of_turn><<bos>>".repeat(2_000),
    ];
    for text in &texts {
        for parse_special in [false, true] {
            let got = tok.encode(text, parse_special).unwrap();
            assert_eq!(tok.decode(&got), text.as_bytes(), "{:?}…", &text[..text.len().min(24)]);
        }
    }
}

#[test]
fn cli_tokenize_by_model_name() {
    common::gemma3_path();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ultra")).args(args).output().expect("run ultra");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("one JSON object")
    };
    let case = cases().iter().find(|c| c["name"] == "control_tokens").unwrap();
    let text = text_of(case);
    let got = run(&["tokenize", "--model", "gemma3-270m", "--text", &text, "--json"]);
    assert_eq!(ids(&got["ids"]), expected(case, "parse_special"));
    let got = run(&["tokenize", "--model", "gemma3-270m", "--text", &text, "--no-special", "--json"]);
    assert_eq!(ids(&got["ids"]), expected(case, "no_parse_special"));
    let got = run(&["tokenize", "--model", "gemma3-270m", "--text", "", "--json"]);
    assert_eq!(got, serde_json::json!({ "ids": [] }));
    let listed = run(&["models", "--json"]);
    let gemma = listed["models"].as_array().unwrap().iter().find(|m| m["name"] == "gemma3-270m").unwrap();
    assert_eq!((gemma["cached"].as_bool(), gemma["bytes"].as_u64()), (Some(true), Some(gemma3().size)));
}

/// Seeded random texts drawn from every kind of character the cases cover: each must encode and
/// decode back to itself in both modes (`▁`, which SentencePiece reads as a space, is left out).
#[test]
fn random_texts_round_trip() {
    let tok = tokenizer();
    let pools: &[&[char]] = &[
        &['a', 'Z', '0', '.', ',', '\'', '<', '>', '/', '_'],
        &[' ', ' ', ' ', '\n', '\t', '\r'],
        &['é', 'ß', 'ж', 'ع', 'न', '日', '本', '한', '\u{301}', '\u{200d}'],
        &['😀', '👍', '\u{1F3FD}', '\u{20000}', '\u{E000}', '\u{10FFFD}', '\u{0}', '\u{7f}', '\u{feff}'],
    ];
    let words = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<table>", "[multimodal]", "<0x41>", "the", " of"];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for _ in 0..2000 {
        let mut text = String::new();
        for _ in 0..next(40) {
            if next(8) == 0 {
                text.push_str(words[next(words.len())]);
            } else {
                let pool = pools[next(pools.len())];
                text.push(pool[next(pool.len())]);
            }
        }
        for parse_special in [false, true] {
            let got = tok.encode(&text, parse_special).unwrap();
            assert_eq!(tok.decode(&got), text.as_bytes(), "{text:?}, parse_special {parse_special}");
        }
    }
}

/// Without parse_special, the written form of every control token stays text: no merge of
/// ordinary pieces spells a control (or byte) token in this vocabulary, so llama.cpp's merge
/// lookup over all tokens and SentencePiece's over ordinary pieces agree here.
#[test]
fn control_token_texts_stay_text_without_parse_special() {
    let tok = tokenizer();
    let mut checked = 0;
    for id in 0..tok.vocab_size() as u32 {
        if !matches!(tok.token_type(id), Some(TokenType::Control | TokenType::Byte)) {
            continue;
        }
        let text = tok.token_str(id).unwrap();
        let got = tok.encode(text, false).unwrap();
        let special = got.iter().find(|&&g| tok.token_type(g) == Some(TokenType::Control));
        assert!(special.is_none() && !got.contains(&id), "{text:?} → {got:?} holds a control or byte token");
        assert_eq!(tok.decode(&got), text.as_bytes());
        checked += 1;
    }
    assert_eq!(checked, 6249 + 256);
}

/// Gemma 3's vocabulary made Llama-2-like (`add_space_prefix` on, the user-defined runs of spaces
/// typed unused): a leading `▁` at the start and after every special token, against
/// SentencePiece's dummy prefix on each fragment between special tokens (tokenize.json
/// `space_prefix_cases`; the README says why the space tokens are set aside).
#[test]
fn leading_space_rule_on_a_real_vocabulary() {
    use ultra::gguf::{Value, ValueType};
    let gguf = Gguf::open(&common::gemma3_path()).unwrap();
    let mut writer = ultra::gguf::GgufWriter::new();
    let (flag, types) = ("tokenizer.ggml.add_space_prefix", "tokenizer.ggml.token_type");
    for (key, value) in gguf.metadata.iter().filter(|(k, _)| k.starts_with("tokenizer.") && k != flag && k != types) {
        writer.meta(key, value.clone());
    }
    writer.meta(flag, Value::Bool(true));
    let tok = tokenizer();
    let retyped = (0..tok.vocab_size() as u32).map(|id| {
        let text = tok.token_str(id).unwrap();
        let spaces = !text.is_empty() && text.bytes().all(|b| b == b' ');
        let code = match tok.token_type(id).unwrap() {
            TokenType::UserDefined if spaces => 5,
            TokenType::Normal => 1,
            TokenType::Control => 3,
            TokenType::UserDefined => 4,
            TokenType::Byte => 6,
            other => panic!("gemma3 has no {other:?} tokens"),
        };
        Value::I32(code)
    });
    writer.meta(types, Value::Array(ValueType::I32, retyped.collect()));
    let prefixed = Gguf::parse(std::sync::Arc::new(writer.to_bytes())).unwrap();
    let tok = Tokenizer::from_gguf(&prefixed).unwrap();
    assert!(tok.add_space_prefix());
    let cases = refs()["space_prefix_cases"].as_array().unwrap();
    assert!(cases.len() >= 140);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let text = case["text"].as_str().unwrap();
        for (parse_special, suffix) in [(true, "parse_special"), (false, "no_parse_special")] {
            let got = tok.encode(text, parse_special).unwrap();
            assert_eq!(got, ids(&case[format!("ids_{suffix}")]), "{name}: ids_{suffix} with add_space_prefix");
        }
    }
    assert_eq!(tok.decode(&tok.encode("Hello", false).unwrap()), b" Hello", "the added space comes back");
}
