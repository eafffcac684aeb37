//! Reading the vocabulary's metadata out of a GGUF: token strings and types, and the ids of the
//! special tokens, including llama.cpp's detection of end-of-generation tokens by their text.

use std::collections::{BTreeSet, HashMap};

use super::{TokenType, TokenizerKind, bytes, spm};
use crate::error::{Error, Result};
use crate::gguf::{Gguf, Value};

/// Ids of the model's special tokens; `None` where the model has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// End of turn. Taken from the file, else detected by text as llama.cpp does.
    pub eot: Option<u32>,
    /// End of message (Llama 3.1 tool calls). From the file, else `<|eom_id|>` if present.
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
}

/// Texts llama.cpp takes as the end-of-turn token when the file names none (llama-vocab.cpp at
/// the reference commit). With several present, llama.cpp's pick depends on hash order; we take
/// the lowest id, which for SmolLM2 is `<|endoftext|>` (0), as llama.cpp reports.
const EOT_TEXTS: &[&str] =
    &["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>"];

/// Texts that always end generation in llama.cpp (`special_eog_ids`), whatever the file says.
const EOG_TEXTS: &[&str] =
    &["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>"];

/// The token strings and their types (all normal when the file has no `token_type` array).
pub fn read_tokens(gguf: &Gguf) -> Result<(Vec<String>, Vec<TokenType>)> {
    let tokens = array(gguf, "tokenizer.ggml.tokens")?
        .ok_or_else(|| Error::Tokenizer("the GGUF has no tokenizer.ggml.tokens array".into()))?;
    if tokens.is_empty() || tokens.len() > i32::MAX as usize {
        return Err(Error::Tokenizer(format!("tokenizer.ggml.tokens has {} entries", tokens.len())));
    }
    let tokens = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_str().map(String::from).ok_or_else(|| Error::Tokenizer(format!("token {i} is not a string")))
        })
        .collect::<Result<Vec<_>>>()?;
    let types = match array(gguf, "tokenizer.ggml.token_type")? {
        None => vec![TokenType::Normal; tokens.len()],
        Some(types) if types.len() != tokens.len() => {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.token_type has {} entries for {} tokens",
                types.len(),
                tokens.len()
            )));
        }
        Some(types) => types.iter().map(|v| TokenType::from_gguf(v.as_f64().unwrap_or(0.0) as i64)).collect(),
    };
    Ok((tokens, types))
}

/// A SentencePiece vocabulary's scores, one finite-or-not f32 per token. Required: without them
/// every merge would tie (llama.cpp silently uses 0.0), which is a different tokenizer.
pub fn scores(gguf: &Gguf, n_tokens: usize) -> Result<Vec<f32>> {
    let scores = array(gguf, "tokenizer.ggml.scores")?.ok_or_else(|| {
        Error::Tokenizer("a SentencePiece (`llama`) vocabulary needs tokenizer.ggml.scores; the GGUF has none".into())
    })?;
    if scores.len() != n_tokens {
        return Err(Error::Tokenizer(format!(
            "tokenizer.ggml.scores has {} entries for {n_tokens} tokens",
            scores.len()
        )));
    }
    scores
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            _ => Err(Error::Tokenizer(format!("tokenizer.ggml.scores[{i}] is not a float"))),
        })
        .collect()
}

/// Every token's bytes, concatenated, and where each starts (`offsets[i]..offsets[i + 1]`), as
/// llama.cpp's `token_to_piece(special = true)` renders them: normal tokens are decoded (GPT-2
/// bytes, or `▁` as a space), control and user-defined ones are their text, as are unknown ones
/// in SentencePiece; byte tokens (SentencePiece) are their byte; every other type is nothing.
pub fn pieces(kind: TokenizerKind, tokens: &[String], types: &[TokenType]) -> (Vec<u8>, Vec<usize>) {
    let mut pieces = Vec::new();
    let mut offsets = Vec::with_capacity(tokens.len() + 1);
    offsets.push(0);
    for (text, ty) in tokens.iter().zip(types) {
        match (kind, ty) {
            (TokenizerKind::Bpe, TokenType::Normal) => pieces.extend(bytes::decode(text)),
            (TokenizerKind::SentencePiece, TokenType::Normal) => {
                pieces.extend_from_slice(text.replace(spm::SPACE, " ").as_bytes())
            }
            (TokenizerKind::SentencePiece, TokenType::Byte) => pieces.extend(spm::parse_byte_token(text)),
            (TokenizerKind::SentencePiece, TokenType::Unknown) | (_, TokenType::Control | TokenType::UserDefined) => {
                pieces.extend_from_slice(text.as_bytes())
            }
            _ => {}
        }
        offsets.push(pieces.len());
    }
    (pieces, offsets)
}

/// The array under `key`: `None` if absent, an error if present but not an array.
pub fn array<'g>(gguf: &'g Gguf, key: &str) -> Result<Option<&'g [Value]>> {
    match gguf.get(key) {
        None => Ok(None),
        Some(value) => value.as_array().map(Some).ok_or_else(|| Error::Tokenizer(format!("{key} is not an array"))),
    }
}

/// A token id stored under `key`. Ids outside the vocabulary are ignored, as llama.cpp does
/// (it warns and treats them as absent).
fn token_id(gguf: &Gguf, key: &str, n_tokens: usize) -> Option<u32> {
    gguf.get(key)?.as_u64().filter(|&id| id < n_tokens as u64).map(|id| id as u32)
}

/// Reads the special ids and works out the end-of-generation set. Like llama.cpp, a token found
/// by its text is forced to be a control token (so it is parsed as special and rendered as text).
/// `spm_defaults`: a SentencePiece vocabulary without the keys has llama.cpp's defaults, BOS 1,
/// EOS 2 and unknown 0 (Llama 2's `<s>`, `</s>`, `<unk>`).
pub fn special_ids(
    gguf: &Gguf,
    tokens: &[String],
    token_to_id: &HashMap<String, u32>,
    types: &mut [TokenType],
    spm_defaults: bool,
) -> (SpecialIds, Vec<u32>) {
    let n = tokens.len();
    let key = |name: &str| token_id(gguf, &format!("tokenizer.ggml.{name}_token_id"), n);
    let default = |name: &str, id: u32| {
        let absent = gguf.get(&format!("tokenizer.ggml.{name}_token_id")).is_none();
        Some(id).filter(|&id| spm_defaults && absent && (id as usize) < n)
    };
    let mut ids = SpecialIds {
        bos: key("bos").or_else(|| default("bos", 1)),
        eos: key("eos").or_else(|| default("eos", 2)),
        eot: key("eot"),
        eom: key("eom"),
        unk: key("unknown").or_else(|| default("unknown", 0)),
        pad: key("padding"),
    };
    let mut find = |texts: &[&str]| {
        let found = texts.iter().filter_map(|t| token_to_id.get(*t).copied()).min();
        if let Some(id) = found {
            types[id as usize] = TokenType::Control;
        }
        found
    };
    if ids.eot.is_none() {
        ids.eot = find(EOT_TEXTS);
    }
    if ids.eom.is_none() {
        ids.eom = find(&["<|eom_id|>"]);
    }
    let mut eog = BTreeSet::new();
    for name in ["fim_pad", "fim_rep", "fim_sep"] {
        eog.extend(key(name));
    }
    for text in EOG_TEXTS {
        if let Some(&id) = token_to_id.get(*text) {
            types[id as usize] = TokenType::Control;
            eog.insert(id);
        }
    }
    eog.extend(ids.eos);
    // Several end ids (a Hugging Face generation_config.json's list; our key, not llama.cpp's).
    if let Some(list) = gguf.get("tokenizer.ggml.eog_token_ids").and_then(|v| v.as_array()) {
        eog.extend(list.iter().filter_map(|v| v.as_u64()).filter(|&id| id < n as u64).map(|id| id as u32));
    }
    eog.extend(ids.eot);
    eog.extend(ids.eom);
    (ids, eog.into_iter().collect())
}
