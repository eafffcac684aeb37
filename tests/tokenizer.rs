//! The tokenizer against llama.cpp's own output for SmolLM2 (tests/data/smollm2): ids, pieces,
//! decoding, streaming and the chat template; plus errors on files it cannot handle.

mod common;

use std::sync::OnceLock;
use std::time::Instant;

use sha2::{Digest, Sha256};
use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};
use ultra::tokenizer::{ChatMessage, Tokenizer};

use common::{hex, ids, load_json};

/// The real model's tokenizer, loaded once per test binary.
fn tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let gguf = Gguf::open(&common::model_path()).expect("open the default model");
        Tokenizer::from_gguf(&gguf).expect("build the tokenizer")
    })
}

fn json_str(value: &serde_json::Value, key: &str) -> String {
    value[key].as_str().unwrap_or_else(|| panic!("`{key}` is not a string")).to_string()
}

#[test]
fn smollm2_metadata() {
    let tok = tokenizer();
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.eog_ids(), [0, 2]);
    let special = tok.special_ids();
    assert_eq!(
        (special.bos, special.eos, special.eot, special.unk, special.pad),
        (Some(1), Some(2), Some(0), Some(0), Some(2))
    );
    assert!(!tok.add_bos() && !tok.add_eos());
    assert_eq!(tok.pre_tokenizer().map(|p| p.name()), Some("smollm"));
    assert_eq!(tok.kind(), ultra::tokenizer::TokenizerKind::Bpe);
    assert_eq!(tok.id_of("<|im_start|>"), Some(1));
    assert_eq!(tok.token_str(2), Some("<|im_end|>"));
    assert_eq!(tok.id_of("Ġthe").and_then(|id| tok.token_str(id)), Some("Ġthe"));
    assert_eq!(tok.token_bytes(tok.id_of("Ġthe").unwrap()), b" the");
    assert!(tok.token_bytes(1_000_000).is_empty() && tok.token_str(1_000_000).is_none());
    assert!(tok.is_eog(2) && !tok.is_eog(1));
    let refs = load_json("smollm2/tokenize.json");
    assert_eq!(ids(&refs["vocab"]["control_ids"]), (0..17).collect::<Vec<u32>>());
}

#[test]
fn tokenize_cases_match_llama_cpp() {
    let tok = tokenizer();
    let refs = load_json("smollm2/tokenize.json");
    let cases = refs["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 20);
    for case in cases {
        let name = json_str(case, "name");
        let text = json_str(case, "text");
        assert_eq!(text.as_bytes(), hex(&json_str(case, "text_hex")), "{name}: text_hex");
        for (parse_special, suffix) in [(true, "parse_special"), (false, "no_parse_special")] {
            let expected = ids(&case[format!("ids_{suffix}")]);
            let got = tok.encode(&text, parse_special).unwrap();
            assert_eq!(got, expected, "{name}: ids_{suffix}");
            assert_eq!(tok.encode_with_specials(&text, parse_special).unwrap(), expected, "{name}: add_special");
            assert_eq!(tok.decode(&got), text.as_bytes(), "{name}: decode of ids_{suffix}");
            let pieces: Vec<Vec<u8>> = case[format!("pieces_{suffix}_hex")]
                .as_array()
                .expect("pieces")
                .iter()
                .map(|p| hex(p.as_str().expect("piece hex")))
                .collect();
            let got_pieces: Vec<Vec<u8>> = got.iter().map(|&id| tok.token_bytes(id).to_vec()).collect();
            assert_eq!(got_pieces, pieces, "{name}: pieces_{suffix}_hex");
            let strings: Vec<&str> = got.iter().map(|&id| tok.token_str(id).unwrap()).collect();
            let expected_strings: Vec<String> = case[format!("tokens_{suffix}")]
                .as_array()
                .expect("tokens")
                .iter()
                .map(|t| t.as_str().expect("token").to_string())
                .collect();
            assert_eq!(strings, expected_strings, "{name}: tokens_{suffix}");
        }
    }
}

/// GPL-3 (35,149 bytes, 7639 tokens). perplexity.json stores only the ids and the text's sha256,
/// so the text is rebuilt by decoding the ids, checked against the sha256, and re-encoded.
#[test]
fn perplexity_text_round_trips_and_is_fast() {
    let tok = tokenizer();
    let refs = load_json("smollm2/perplexity.json");
    let info = &refs["text"];
    let expected = ids(&info["token_ids"]);
    assert_eq!(expected.len() as u64, info["n_tokens"].as_u64().unwrap());
    let bytes = tok.decode(&expected);
    assert_eq!(bytes.len() as u64, info["bytes"].as_u64().unwrap());
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, json_str(info, "sha256"), "decoded text is not the GPL-3 the ids came from");
    let text = String::from_utf8(bytes).expect("GPL-3 is UTF-8");
    let start = Instant::now();
    let got = tok.encode_with_specials(&text, false).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(got.len(), expected.len());
    let first_diff = got.iter().zip(&expected).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "first difference at token {first_diff:?}");
    eprintln!("GPL-3: {} tokens in {elapsed:?}", got.len());
    // Generous for an unoptimized build on a busy machine; release takes a few milliseconds.
    assert!(elapsed.as_secs_f64() < 1.0, "tokenizing GPL-3 took {elapsed:?}");
}

#[test]
fn greedy_prompts_and_generations() {
    let tok = tokenizer();
    let refs = load_json("smollm2/greedy.json");
    let prompts = refs["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 8);
    for prompt in prompts {
        let name = json_str(prompt, "name");
        let got = tok.encode(&json_str(prompt, "prompt"), true).unwrap();
        assert_eq!(got, ids(&prompt["prompt_ids"]), "{name}: prompt_ids");
        let mut generated = ids(&prompt["generated_ids"]);
        let pieces = prompt["generated_pieces_hex"].as_array().expect("pieces");
        for (id, piece) in generated.iter().zip(pieces) {
            assert_eq!(tok.token_bytes(*id), hex(piece.as_str().unwrap()), "{name}: piece of {id}");
        }
        // generated_text leaves out the stop token.
        if prompt["stopped_at_eos"].as_bool() == Some(true) {
            let stop = generated.pop().unwrap();
            assert!(tok.is_eog(stop), "{name}: stop token {stop}");
        }
        assert_eq!(tok.decode(&generated), hex(&json_str(prompt, "generated_text_hex")), "{name}: generated text");
    }
}

#[test]
fn stream_decoder_yields_whole_characters() {
    let tok = tokenizer();
    let refs = load_json("smollm2/greedy.json");
    let prompt = refs["prompts"].as_array().unwrap().iter().find(|p| p["name"] == "pub_emoji_cjk").unwrap();
    let generated = ids(&prompt["generated_ids"]);
    let full = tok.decode(&generated);
    assert!(std::str::from_utf8(&full).is_err(), "the case ends inside an emoji");
    let mut stream = tok.stream_decoder();
    let mut streamed = String::new();
    let mut held_back = 0;
    for &id in &generated {
        let piece = stream.push(id);
        // A String is valid UTF-8 by construction; what matters is that nothing was replaced.
        assert!(!piece.contains('\u{FFFD}'), "replacement character mid-stream: {piece:?}");
        held_back += usize::from(!stream.pending_bytes().is_empty());
        streamed.push_str(&piece);
    }
    assert!(held_back > 0, "some token should end inside a character");
    let valid = std::str::from_utf8(&full).unwrap_err().valid_up_to();
    assert_eq!(streamed.as_bytes(), &full[..valid], "before flush: every complete character");
    let tail = stream.flush();
    assert_eq!(tail, "\u{FFFD}", "the unfinished emoji comes out as one U+FFFD");
    streamed.push_str(&tail);
    assert_eq!(streamed, String::from_utf8_lossy(&full));
    assert_eq!(streamed, tok.decode_lossy(&generated));
}

#[test]
fn chat_template_reproduces_the_chat_prompt() {
    let tok = tokenizer();
    let refs = load_json("smollm2/greedy.json");
    let case = refs["prompts"].as_array().unwrap().iter().find(|p| p["name"] == "pub_chat_capital").unwrap();
    let prompt = json_str(case, "prompt");
    // The user turn is the text between `<|im_start|>user\n` and the next `<|im_end|>`.
    let user = prompt.split("<|im_start|>user\n").nth(1).and_then(|rest| rest.split("<|im_end|>").next()).unwrap();
    assert_eq!(user, "What is the capital of France, and why is it famous?");
    // Only the user message: the default system prompt must come from the template itself.
    let rendered = tok.apply_chat_template(&[ChatMessage::user(user)], true).unwrap();
    assert_eq!(rendered, prompt);
    assert_eq!(tok.encode(&rendered, true).unwrap(), ids(&case["prompt_ids"]));
    // An explicit system message replaces the default one.
    let custom = tok.apply_chat_template(&[ChatMessage::system("Be brief."), ChatMessage::user("Hi")], false).unwrap();
    assert_eq!(custom, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

#[test]
fn any_text_encodes_without_panic_and_round_trips() {
    let tok = tokenizer();
    let texts = [
        "\u{0}\u{1}\u{7f}\u{80}\u{ad}\u{a0}\u{feff}",
        "<|im_start|<|im_end|>>><|endoftext|><|im_start|><",
        "\u{10ffff}\u{e000}\u{378}\u{fffd}",
        "     \n\n\n\t\t \r\r\n  x",
        "'s'S'''ll 'LL'd'",
        "١٢٣ ⅧⅫ ½¾ 𝟙𝟚",
        "e\u{301}\u{301}\u{301} ज़िंदगी 👩\u{200d}👩\u{200d}👧",
    ];
    let long = ["ab".repeat(100_000), "9".repeat(5000), "\u{1F600}".repeat(10_000), " \u{3000}\t".repeat(10_000)];
    for text in texts.iter().map(|t| t.to_string()).chain(long) {
        for parse_special in [false, true] {
            let ids = tok.encode(&text, parse_special).unwrap();
            assert_eq!(tok.decode(&ids), text.as_bytes(), "{:?}", &text[..text.len().min(40)]);
        }
    }
}

/// A backtracking `\s+(?!\S)` runs out of stack on this (fancy-regex's VM did, at about a
/// million spaces); the splitter must stay linear-time.
#[test]
fn a_million_spaces_encode() {
    let tok = tokenizer();
    let text = format!("{}a", " ".repeat(1_000_000));
    let ids = tok.encode(&text, false).unwrap();
    assert_eq!(tok.decode(&ids), text.as_bytes());
    // The run gives its last space to the word: the final token is " a".
    assert_eq!(tok.token_bytes(*ids.last().unwrap()), b" a");
}

/// A GGUF holding only tokenizer metadata: a 4-token vocabulary plus the given overrides.
fn tiny_gguf(edit: impl FnOnce(&mut Vec<(&'static str, Value)>)) -> Gguf {
    let strings =
        |list: &[&str]| Value::Array(ValueType::String, list.iter().map(|s| Value::String(s.to_string())).collect());
    let mut meta = vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("smollm".into())),
        ("tokenizer.ggml.tokens", strings(&["<|endoftext|>", "a", "b", "ab"])),
        ("tokenizer.ggml.token_type", Value::Array(ValueType::I32, [3, 1, 1, 1].map(Value::I32).to_vec())),
        ("tokenizer.ggml.merges", strings(&["a b"])),
    ];
    edit(&mut meta);
    let mut writer = GgufWriter::new();
    for (key, value) in meta {
        writer.meta(key, value);
    }
    Gguf::parse(std::sync::Arc::new(writer.to_bytes())).expect("parse the fixture")
}

fn set(meta: &mut Vec<(&'static str, Value)>, key: &'static str, value: Option<Value>) {
    meta.retain(|(k, _)| *k != key);
    if let Some(value) = value {
        meta.push((key, value));
    }
}

fn error_of(gguf: Gguf) -> String {
    Tokenizer::from_gguf(&gguf).expect_err("the fixture should be refused").to_string()
}

#[test]
fn tiny_fixture_works_and_bad_files_are_clear_errors() {
    let tok = Tokenizer::from_gguf(&tiny_gguf(|_| {})).unwrap();
    assert_eq!(tok.encode("ab<|endoftext|>", true).unwrap(), [3, 0]);
    assert_eq!(tok.encode("ab<|endoftext|>", false).unwrap().first(), Some(&3));
    assert_eq!(tok.eog_ids(), [0]);
    assert!(
        tok.apply_chat_template(&[ChatMessage::user("x")], true).unwrap_err().to_string().contains("chat_template")
    );

    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.pre", Some(Value::String("klingon".into())))));
    assert!(err.contains("klingon") && err.contains("pre"), "{err}");
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.model", Some(Value::String("rwkv".into())))));
    assert!(err.contains("`rwkv`") && err.contains("not supported"), "{err}");
    // A SentencePiece vocabulary must carry its scores.
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.model", Some(Value::String("llama".into())))));
    assert!(err.contains("tokenizer.ggml.scores"), "{err}");
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.model", None)));
    assert!(err.contains("tokenizer.ggml.model"), "{err}");
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.tokens", None)));
    assert!(err.contains("tokenizer.ggml.tokens"), "{err}");
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.tokens", Some(Value::U32(4)))));
    assert!(err.contains("not an array"), "{err}");
    let err = error_of(tiny_gguf(|m| set(m, "tokenizer.ggml.merges", None)));
    assert!(err.contains("merges"), "{err}");
    let err = error_of(tiny_gguf(|m| {
        set(m, "tokenizer.ggml.token_type", Some(Value::Array(ValueType::I32, vec![Value::I32(1)])))
    }));
    assert!(err.contains("token_type"), "{err}");
}

/// Llama 3's and Qwen 2's word splits equal Hugging Face `tokenizers`' on written and random
/// texts (tests/data/pretokenize, made by make_splits.py there).
#[test]
fn llama3_and_qwen2_splits_equal_hugging_face_tokenizers() {
    let data = common::load_json("pretokenize/splits.json");
    let cases = data["cases"].as_array().expect("cases");
    for name in ["llama3", "qwen2"] {
        let pre = ultra::tokenizer::PreTokenizer::from_name(name).unwrap();
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let want: Vec<&str> = case[name].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
            assert_eq!(pre.split(text).unwrap(), want, "{name} on {text:?}");
        }
    }
}
