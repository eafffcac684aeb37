//! `tokenizer.json` (+ `tokenizer_config.json`, `chat_template.jinja`, `generation_config.json`)
//! → the `tokenizer.*` GGUF keys our own tokenizer reads (src/tokenizer/), as llama.cpp's
//! converter writes them. Two shapes of the Hugging Face `tokenizers` BPE model are recognised:
//! - byte-level BPE (GPT-2 bytes): `tokenizer.ggml.model = gpt2`, the merges as they are, and the
//!   pre-tokenizer named by what `pre_tokenizer` holds (GPT-2's ByteLevel regex, SmolLM's
//!   digits + ByteLevel, or Llama 3's / Qwen 2's Split regex);
//! - SentencePiece-style (Gemma, Llama 2): byte fallback over `▁`-spaced text. It becomes
//!   `tokenizer.ggml.model = llama`, whose merges go by score: the token made by merge r scores
//!   -r, so the highest-ranked merge wins as in BPE; other tokens score -1e9.
//!
//! Added tokens are control tokens when `special`, user-defined otherwise. Anything else
//! (WordPiece, Unigram, other normalizers) is refused by name.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::gguf::{Value, ValueType};

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::Tokenizer(format!("tokenizer.json: {msg}"))
}

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A JSON string, or the `content` of an `{"content": ...}` object (tokenizer_config's tokens).
fn text_of(v: &Json) -> Option<&str> {
    v.as_str().or_else(|| v.get("content").and_then(|c| c.as_str()))
}

fn read_json(path: &Path) -> Result<Option<Json>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(Error::file(path))?;
    serde_json::from_str(&text).map(Some).map_err(|e| Error::Tokenizer(format!("{}: not JSON: {e}", path.display())))
}

fn strings(values: impl IntoIterator<Item = String>) -> Value {
    Value::Array(ValueType::String, values.into_iter().map(Value::String).collect())
}

/// The pre-tokenizer name (pretokenize.rs's table) for a byte-level `pre_tokenizer`.
fn byte_level_pre(pre: &Json) -> Result<&'static str> {
    let kind = |v: &Json| v.get("type").and_then(|t| t.as_str()).unwrap_or("").to_string();
    let steps: Vec<&Json> = match kind(pre).as_str() {
        "Sequence" => {
            pre.get("pretokenizers").and_then(|p| p.as_array()).map(|a| a.iter().collect()).unwrap_or_default()
        }
        _ => vec![pre],
    };
    let kinds: Vec<String> = steps.iter().map(|s| kind(s)).collect();
    let regex = |v: &Json| v.pointer("/pattern/Regex").and_then(|r| r.as_str()).unwrap_or("").to_string();
    let byte_regex = |v: &Json| v.get("use_regex").and_then(|u| u.as_bool()).unwrap_or(true);
    let name = match kinds.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["ByteLevel"] if byte_regex(steps[0]) => "gpt-2",
        ["Digits", "ByteLevel"]
            if steps[0].get("individual_digits").and_then(|d| d.as_bool()) == Some(true) && byte_regex(steps[1]) =>
        {
            "smollm"
        }
        ["Split", "ByteLevel"] if !byte_regex(steps[1]) && regex(steps[0]) == LLAMA3_SPLIT => "llama-bpe",
        ["Split", "ByteLevel"] if !byte_regex(steps[1]) && regex(steps[0]) == QWEN2_SPLIT => "qwen2",
        _ => {
            return Err(bad(format!(
                "byte-level pre_tokenizer {pre} is not one this engine knows (GPT-2, SmolLM, Llama 3, Qwen 2)"
            )));
        }
    };
    Ok(name)
}

/// What kind of SentencePiece-style text preparation the file describes: whether a `▁` is
/// prepended (Llama 2 style) or not (Gemma).
fn spm_space_prefix(normalizer: &Json, pre: &Json) -> Result<bool> {
    let kind = |v: &Json| v.get("type").and_then(|t| t.as_str()).unwrap_or("").to_string();
    let steps: Vec<&Json> = match kind(normalizer).as_str() {
        "Sequence" => {
            normalizer.get("normalizers").and_then(|p| p.as_array()).map(|a| a.iter().collect()).unwrap_or_default()
        }
        "" => vec![],
        _ => vec![normalizer],
    };
    let mut prefix = false;
    let mut replaced = false;
    for s in steps {
        match kind(s).as_str() {
            "Prepend" if s.get("prepend").and_then(|p| p.as_str()) == Some("▁") => prefix = true,
            "Replace"
                if s.pointer("/pattern/String").and_then(|p| p.as_str()) == Some(" ")
                    && s.get("content").and_then(|c| c.as_str()) == Some("▁") =>
            {
                replaced = true
            }
            _ => return Err(bad(format!("normalizer step {s} is not supported"))),
        }
    }
    match kind(pre).as_str() {
        "" => {}
        // After `Replace(" ", "▁")` no space is left for a split on " " to cut.
        "Split" if replaced && pre.pointer("/pattern/String").and_then(|p| p.as_str()) == Some(" ") => {}
        "Metaspace" if s_eq(pre, "replacement", "▁") => {
            replaced = true;
            prefix = pre.get("prepend_scheme").and_then(|p| p.as_str()).unwrap_or("always") != "never";
        }
        _ => return Err(bad(format!("pre_tokenizer {pre} is not supported for a byte-fallback BPE"))),
    }
    if !replaced {
        return Err(bad("a byte-fallback BPE without `▁` for spaces is not supported"));
    }
    Ok(prefix)
}

fn s_eq(v: &Json, key: &str, want: &str) -> bool {
    v.get(key).and_then(|x| x.as_str()) == Some(want)
}

/// Reads the tokenizer files of `dir` into GGUF keys. `n_vocab` is the model's vocabulary size
/// (ids past the tokenizer's are padding, as llama.cpp's converter names them `[PADn]`);
/// `eos_ids` come from config.json.
pub fn metadata(
    dir: &Path,
    n_vocab: Option<usize>,
    config_eos: &[u32],
    config_bos: Option<u32>,
) -> Result<Vec<(String, Value)>> {
    let path = dir.join("tokenizer.json");
    let tj = read_json(&path)?.ok_or_else(|| Error::Tokenizer(format!("{} is missing", path.display())))?;
    let tc = read_json(&dir.join("tokenizer_config.json"))?.unwrap_or(Json::Null);
    let generation = read_json(&dir.join("generation_config.json"))?.unwrap_or(Json::Null);
    let model = tj.get("model").ok_or_else(|| bad("no `model`"))?;
    if !s_eq(model, "type", "BPE") {
        return Err(bad(format!("model type {} is not supported (BPE is)", model.get("type").unwrap_or(&Json::Null))));
    }
    let vocab = model.get("vocab").and_then(|v| v.as_object()).ok_or_else(|| bad("no `model.vocab` object"))?;
    let added = tj.get("added_tokens").and_then(|a| a.as_array()).cloned().unwrap_or_default();
    // Without a model, the tokenizer's own size: one past its largest id.
    let n_vocab = n_vocab.unwrap_or_else(|| {
        let ids = vocab.values().chain(added.iter().filter_map(|t| t.get("id")));
        ids.filter_map(|v| v.as_u64()).max().map_or(0, |m| m as usize + 1).min(1 << 24)
    });
    let mut tokens: Vec<Option<String>> = vec![None; n_vocab];
    let mut types = vec![1i32; n_vocab]; // normal
    let place = |id: &Json, text: &str, tokens: &mut Vec<Option<String>>| -> Result<usize> {
        let id = id
            .as_u64()
            .filter(|&i| (i as usize) < n_vocab)
            .ok_or_else(|| bad(format!("token `{text}` has id {id}, outside the model's {n_vocab}")))?
            as usize;
        tokens[id] = Some(text.to_string());
        Ok(id)
    };
    for (text, id) in vocab {
        place(id, text, &mut tokens)?;
    }
    for t in &added {
        let text =
            t.get("content").and_then(|c| c.as_str()).ok_or_else(|| bad(format!("added token {t} has no content")))?;
        let id = place(t.get("id").unwrap_or(&Json::Null), text, &mut tokens)?;
        types[id] = if t.get("special").and_then(|s| s.as_bool()).unwrap_or(false) { 3 } else { 4 };
    }
    let tokens: Vec<String> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.unwrap_or_else(|| {
                types[i] = 5; // unused
                format!("[PAD{i}]")
            })
        })
        .collect();
    let to_id: HashMap<&str, u32> = tokens.iter().enumerate().map(|(i, t)| (t.as_str(), i as u32)).collect();
    let merges: Vec<String> = model
        .get("merges")
        .and_then(|m| m.as_array())
        .ok_or_else(|| bad("no `model.merges` array"))?
        .iter()
        .map(|m| match m {
            Json::String(s) => Ok(s.clone()),
            Json::Array(p) if p.len() == 2 && p.iter().all(|x| x.is_string()) => {
                Ok(format!("{} {}", p[0].as_str().unwrap_or(""), p[1].as_str().unwrap_or("")))
            }
            other => Err(bad(format!("merge {other} is neither \"a b\" nor [a, b]"))),
        })
        .collect::<Result<_>>()?;
    let mut m: Vec<(String, Value)> = Vec::new();
    let null = Json::Null;
    let (normalizer, pre) = (tj.get("normalizer").unwrap_or(&null), tj.get("pre_tokenizer").unwrap_or(&null));
    if model.get("byte_fallback").and_then(|b| b.as_bool()).unwrap_or(false) {
        let prefix = spm_space_prefix(normalizer, pre)?;
        let mut scores = vec![-1e9f32; tokens.len()];
        for (rank, merge) in merges.iter().enumerate() {
            if let Some(&id) = to_id.get(merge.replacen(' ', "", 1).as_str()) {
                scores[id as usize] = scores[id as usize].max(-(rank as f32));
            }
        }
        for (i, t) in tokens.iter().enumerate() {
            if types[i] == 1 && t.len() == 6 && t.starts_with("<0x") && t.ends_with('>') {
                types[i] = 6; // byte
            }
        }
        m.push(("tokenizer.ggml.model".into(), Value::String("llama".into())));
        m.push((
            "tokenizer.ggml.scores".into(),
            Value::Array(ValueType::F32, scores.into_iter().map(Value::F32).collect()),
        ));
        m.push(("tokenizer.ggml.add_space_prefix".into(), Value::Bool(prefix)));
        if let Some(unk) = model.get("unk_token").and_then(|u| u.as_str()).and_then(|u| to_id.get(u)) {
            types[*unk as usize] = 2;
            m.push(("tokenizer.ggml.unknown_token_id".into(), Value::U32(*unk)));
        }
    } else {
        // tokenizers' own NFC is not applied (nor by llama.cpp): it changes only non-NFC text.
        if !normalizer.is_null() && !s_eq(normalizer, "type", "NFC") {
            return Err(bad(format!("normalizer {normalizer} is not supported for byte-level BPE")));
        }
        m.push(("tokenizer.ggml.model".into(), Value::String("gpt2".into())));
        m.push(("tokenizer.ggml.pre".into(), Value::String(byte_level_pre(pre)?.into())));
    }
    m.push(("tokenizer.ggml.merges".into(), strings(merges)));
    m.push((
        "tokenizer.ggml.token_type".into(),
        Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect()),
    ));
    specials(&tj, &tc, &generation, &to_id, config_eos, config_bos, &mut m)?;
    if let Some(t) = chat_template(dir, &tc)? {
        m.push(("tokenizer.chat_template".into(), Value::String(t)));
    }
    m.insert(0, ("tokenizer.ggml.tokens".into(), strings(tokens)));
    Ok(m)
}

/// BOS, EOS (all of generation_config's, config's and the tokenizer's, first one as *the* EOS),
/// padding, and whether BOS is added (tokenizer_config's `add_bos_token`, else the
/// post-processor's template starting with it).
fn specials(
    tj: &Json,
    tc: &Json,
    generation: &Json,
    to_id: &HashMap<&str, u32>,
    config_eos: &[u32],
    config_bos: Option<u32>,
    m: &mut Vec<(String, Value)>,
) -> Result<()> {
    let by_text = |k: &str| tc.get(k).and_then(text_of).and_then(|t| to_id.get(t).copied());
    let ids = |v: Option<&Json>| -> Vec<u32> {
        match v {
            Some(Json::Array(a)) => a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect(),
            Some(x) => x.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
            None => vec![],
        }
    };
    let n = to_id.len() as u32;
    let mut eos: Vec<u32> = ids(generation.get("eos_token_id"));
    eos.extend(config_eos);
    eos.extend(by_text("eos_token"));
    eos.retain(|&id| id < n);
    let mut seen = std::collections::HashSet::new();
    eos.retain(|id| seen.insert(*id));
    if let Some(&first) = eos.first() {
        m.push(("tokenizer.ggml.eos_token_id".into(), Value::U32(first)));
        m.push((
            "tokenizer.ggml.eog_token_ids".into(),
            Value::Array(ValueType::U32, eos.iter().map(|&i| Value::U32(i)).collect()),
        ));
    }
    let template_bos = tj
        .pointer("/post_processor/single/0/SpecialToken/id")
        .and_then(|t| t.as_str())
        .and_then(|t| to_id.get(t).copied());
    let bos = by_text("bos_token")
        .or(template_bos)
        .or(ids(generation.get("bos_token_id")).first().copied())
        .or(config_bos)
        .filter(|&b| b < n);
    if let Some(bos) = bos {
        m.push(("tokenizer.ggml.bos_token_id".into(), Value::U32(bos)));
    }
    if let Some(pad) = by_text("pad_token") {
        m.push(("tokenizer.ggml.padding_token_id".into(), Value::U32(pad)));
    }
    let add_bos = tc.get("add_bos_token").and_then(|b| b.as_bool()).unwrap_or(template_bos.is_some());
    m.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(add_bos)));
    let add_eos = tc.get("add_eos_token").and_then(|b| b.as_bool()).unwrap_or(false);
    m.push(("tokenizer.ggml.add_eos_token".into(), Value::Bool(add_eos)));
    Ok(())
}

/// tokenizer_config.json's `chat_template` (a string, or a list of named ones: `default`), else
/// `chat_template.jinja` (where transformers 5 saves it).
fn chat_template(dir: &Path, tc: &Json) -> Result<Option<String>> {
    match tc.get("chat_template") {
        Some(Json::String(s)) => return Ok(Some(s.clone())),
        Some(Json::Array(list)) => {
            let named = list.iter().find(|t| s_eq(t, "name", "default")).or(list.first());
            return Ok(named.and_then(|t| t.get("template")).and_then(|t| t.as_str()).map(String::from));
        }
        _ => {}
    }
    let path = dir.join("chat_template.jinja");
    if path.is_file() {
        return std::fs::read_to_string(&path).map(Some).map_err(Error::file(&path));
    }
    Ok(None)
}
