//! Corrupted tokenizer metadata, for both vocabulary kinds (byte-level BPE and SentencePiece):
//! seeded byte-level corruption of whole files, and seeded value-level edits of the vocabulary
//! (token texts, types, scores, special ids, flags, merges). Building the tokenizer must return
//! Ok or Err, never panic; a tokenizer that builds must encode, decode and stream any text
//! without panicking, and the unedited vocabularies must round-trip every text exactly.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};
use ultra::tokenizer::{Tokenizer, TokenizerKind};

use super::fuzz::{Rng, mutate};

type Meta = Vec<(String, Value)>;

fn strings(list: &[String]) -> Value {
    Value::Array(ValueType::String, list.iter().map(|s| Value::String(s.clone())).collect())
}

/// A SentencePiece vocabulary: every byte token, a few pieces, control and user-defined tokens.
fn spm_meta() -> Meta {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "<ctl>", "\n\n", "  "].map(String::from).to_vec();
    let mut types = vec![2, 3, 3, 3, 4, 4];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    for piece in ["▁", "a", "b", "▁a", "ab", "▁ab", "é", "▁é", "<", ">", "ctl", "<c"] {
        tokens.push(piece.to_string());
        types.push(1);
    }
    let scores: Vec<Value> = (0..tokens.len()).map(|i| Value::F32(-(i as f32))).collect();
    vec![
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.token_type".into(), Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect())),
        ("tokenizer.ggml.scores".into(), Value::Array(ValueType::F32, scores)),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
        ("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)),
    ]
}

/// A byte-level BPE vocabulary: the 256 byte characters, a few merges, one control token.
fn bpe_meta() -> Meta {
    let mut tokens: Vec<String> = vec!["<|end|>".into()];
    tokens.extend((0..=255u8).map(|b| ultra::tokenizer::bytes::byte_to_char(b).to_string()));
    let merges: Vec<String> = ["a b", "Ġ a", "Ġa b", "c d"].map(String::from).to_vec();
    tokens.extend(["ab", "Ġa", "Ġab", "cd"].map(String::from));
    let mut types = vec![Value::I32(3)];
    types.extend((1..tokens.len()).map(|_| Value::I32(1)));
    vec![
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("smollm".into())),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.token_type".into(), Value::Array(ValueType::I32, types)),
        ("tokenizer.ggml.merges".into(), strings(&merges)),
    ]
}

fn to_bytes(meta: &Meta) -> Vec<u8> {
    let mut writer = GgufWriter::new();
    for (key, value) in meta {
        writer.meta(key, value.clone());
    }
    writer.to_bytes()
}

const PIECES: &[&str] =
    &["a", "b", "ab", " ", "  ", "\n", "\n\n", "▁", "<ctl>", "<|end|>", "<0x41>", "é", "😀", "<", ">", "\t", "\0", "c"];

fn random_text(rng: &mut Rng) -> String {
    (0..rng.below(24)).map(|_| PIECES[rng.below(PIECES.len())]).collect()
}

/// Encodes, decodes and streams random texts; `exact`: the vocabulary is intact, so every text
/// must come back byte for byte (but for SentencePiece's `▁`, which is how it writes a space and
/// so decodes as one).
fn exercise(tok: &Tokenizer, rng: &mut Rng, exact: bool) {
    for _ in 0..4 {
        let text = random_text(rng);
        for parse_special in [false, true] {
            let ids = tok.encode(&text, parse_special).expect("built-in patterns never fail");
            let bytes = tok.decode(&ids);
            if exact {
                let want = match tok.kind() {
                    TokenizerKind::SentencePiece => text.replace('▁', " "),
                    TokenizerKind::Bpe => text.clone(),
                };
                assert_eq!(bytes, want.as_bytes(), "{text:?}, parse_special {parse_special}");
            }
            let mut stream = tok.stream_decoder();
            let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
            streamed.push_str(&stream.flush());
            assert_eq!(streamed, String::from_utf8_lossy(&bytes));
            let _ = tok.encode_with_specials(&text, parse_special);
        }
    }
    let ids: Vec<u32> = (0..rng.below(16)).map(|_| rng.next() as u32 % (tok.vocab_size() as u32 + 4)).collect();
    let _ = tok.decode_lossy(&ids);
}

/// One seeded edit of the vocabulary's values.
fn edit(rng: &mut Rng, meta: &mut Meta) {
    let i = rng.below(meta.len());
    let hostile_numbers = [0u64, 1, 2, 255, 256, 300, u32::MAX as u64, u64::MAX];
    let value = &mut meta[i].1;
    match value {
        Value::Array(ty, items) if !items.is_empty() => {
            let at = rng.below(items.len());
            // Items keep the array's type, so the file still parses and the edit reaches the
            // tokenizer; a mistyped item is the byte-level half's job.
            let replacement = match ty {
                ValueType::String => match rng.below(2) {
                    0 => Value::String(random_text(rng)),
                    _ => Value::String(["<0x", "<0xZZ>", "<0x+1>", "", "▁▁", "a b", "<ctl>"][rng.below(7)].into()),
                },
                ValueType::I32 => Value::I32(rng.next() as i32 % 8),
                _ => Value::F32([f32::NAN, f32::INFINITY, -f32::INFINITY, 0.0, 1e30, -1e30][rng.below(6)]),
            };
            match rng.below(4) {
                0 => {
                    items.remove(at);
                }
                1 => items.truncate(at),
                2 => {
                    let copy = items[rng.below(items.len())].clone();
                    items.insert(at, copy);
                }
                _ => items[at] = replacement,
            }
        }
        _ => {
            *value = match rng.below(4) {
                0 => Value::U64(hostile_numbers[rng.below(hostile_numbers.len())]),
                1 => Value::Bool(rng.below(2) == 0),
                2 => Value::String(["llama", "gpt2", "", "t5"][rng.below(4)].into()),
                _ => Value::Array(ValueType::U8, vec![]),
            }
        }
    }
    if rng.below(8) == 0 {
        let key = ["tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.eot_token_id"];
        let value = if rng.below(2) == 0 { Value::U32(rng.next() as u32 % 300) } else { Value::Bool(true) };
        meta.push((key[rng.below(key.len())].into(), value));
    }
}

#[test]
fn intact_vocabularies_round_trip_any_text() {
    let mut rng = Rng(7);
    for meta in [spm_meta(), bpe_meta()] {
        let gguf = Gguf::parse(Arc::new(to_bytes(&meta))).unwrap();
        let tok = Tokenizer::from_gguf(&gguf).expect("the intact fixture builds");
        for _ in 0..200 {
            exercise(&tok, &mut rng, true);
        }
    }
}

#[test]
fn seeded_tokenizer_corruption_never_panics() {
    let bases = [spm_meta(), bpe_meta()];
    let byte_bases = [to_bytes(&bases[0]), to_bytes(&bases[1])];
    let started = Instant::now();
    let (mut built, mut slowest) = ([0usize; 2], Duration::ZERO);
    for seed in 0..4000u64 {
        let mut rng = Rng(seed ^ 0x5eed);
        let kind = seed as usize % 2;
        // Half the cases corrupt the file's bytes, half edit its values.
        let bytes = if seed % 4 < 2 {
            mutate(&mut rng, byte_bases[kind].clone())
        } else {
            let mut meta = bases[kind].clone();
            for _ in 0..1 + rng.below(3) {
                edit(&mut rng, &mut meta);
            }
            to_bytes(&meta)
        };
        let t0 = Instant::now();
        let Ok(gguf) = Gguf::parse(Arc::new(bytes)) else { continue };
        if let Ok(tok) = Tokenizer::from_gguf(&gguf) {
            built[kind] += 1;
            exercise(&tok, &mut rng, false);
        }
        slowest = slowest.max(t0.elapsed());
    }
    eprintln!(
        "4000 corrupted vocabularies: {built:?} (spm, bpe) still build; slowest {slowest:?}, total {:?}",
        started.elapsed()
    );
    // Enough of each kind must survive the edits for the encode paths to have been exercised.
    assert!(built[0] > 300 && built[1] > 300, "{built:?}");
    assert!(slowest < Duration::from_secs(1), "a case took {slowest:?}");
}
