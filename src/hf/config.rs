//! `config.json` → the GGUF metadata keys `Config::from_gguf` reads, as llama.cpp's
//! convert_hf_to_gguf.py writes them (`<arch>.block_count`, `.embedding_length`, ...). Settings
//! the engine hard-codes per architecture (Gemma 3's layer pattern, local RoPE base, attention
//! scale) are checked against the file here and refused where they differ, rather than run wrong.

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::gguf::Value;
use crate::model::Arch;

/// What `config.json` says, beyond the GGUF keys: what the tensor mapping needs.
pub struct HfConfig {
    pub arch: Arch,
    pub metadata: Vec<(String, Value)>,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub tied: bool,
    /// Llama 3 rope scaling, which llama.cpp writes as a `rope_freqs` tensor.
    pub llama3_rope: Option<Llama3Rope>,
    /// The model's end-of-generation ids named in config.json.
    pub eos_ids: Vec<u32>,
    pub bos_id: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
pub struct Llama3Rope {
    pub theta: f64,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max: f64,
}

fn bad(msg: String) -> Error {
    Error::Metadata(format!("config.json: {msg}"))
}

/// Typed reads of one JSON object, naming the key on error.
struct Obj<'a>(&'a serde_json::Map<String, Json>);

impl Obj<'_> {
    fn present(&self, k: &str) -> Option<&Json> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    fn count(&self, k: &str) -> Result<usize> {
        let v = self.present(k).ok_or_else(|| bad(format!("`{k}` is missing")))?;
        v.as_u64()
            .filter(|&n| n > 0 && n <= 1 << 24)
            .map(|n| n as usize)
            .ok_or_else(|| bad(format!("`{k}` = {v} is not a positive count")))
    }
    fn count_or(&self, k: &str, default: usize) -> Result<usize> {
        if self.present(k).is_some() { self.count(k) } else { Ok(default) }
    }
    fn float_or(&self, k: &str, default: f64) -> Result<f64> {
        match self.present(k) {
            None => Ok(default),
            Some(v) => {
                v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| bad(format!("`{k}` = {v} is not a finite number")))
            }
        }
    }
    fn str_or<'s>(&'s self, k: &str, default: &'s str) -> Result<&'s str> {
        match self.present(k) {
            None => Ok(default),
            Some(v) => v.as_str().ok_or_else(|| bad(format!("`{k}` = {v} is not a string"))),
        }
    }
    fn flag(&self, k: &str, default: bool) -> Result<bool> {
        match self.present(k) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| bad(format!("`{k}` = {v} is not a boolean"))),
        }
    }
    fn ids(&self, k: &str) -> Result<Vec<u32>> {
        let id = |v: &Json| v.as_u64().filter(|&n| n <= u32::MAX as u64).map(|n| n as u32);
        match self.present(k) {
            None => Ok(Vec::new()),
            Some(Json::Array(a)) => {
                a.iter().map(|v| id(v).ok_or_else(|| bad(format!("`{k}` holds {v}, not a token id")))).collect()
            }
            Some(v) => id(v).map(|i| vec![i]).ok_or_else(|| bad(format!("`{k}` = {v} is not a token id"))),
        }
    }
}

/// Parses `config.json`'s text.
pub fn parse(text: &str) -> Result<HfConfig> {
    let root: Json = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let root = root.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
    let model_type = Obj(root).str_or("model_type", "")?.to_string();
    // A multimodal Gemma 3 nests its language model's settings under `text_config`.
    let c = match (model_type.as_str(), root.get("text_config").and_then(|t| t.as_object())) {
        ("gemma3", Some(text)) => Obj(text),
        _ => Obj(root),
    };
    let arch = match model_type.as_str() {
        "llama" => Arch::Llama,
        "qwen2" => Arch::Qwen2,
        "qwen3" => Arch::Qwen3,
        "gemma3" | "gemma3_text" => Arch::Gemma3,
        "" => return Err(bad("`model_type` is missing".into())),
        other => {
            return Err(bad(format!(
                "model_type `{other}` is not supported (llama, qwen2, qwen3, gemma3, gemma3_text are)"
            )));
        }
    };
    let n_layers = c.count("num_hidden_layers")?;
    let d_model = c.count("hidden_size")?;
    let n_heads = c.count("num_attention_heads")?;
    let n_kv_heads = c.count_or("num_key_value_heads", n_heads)?;
    let head_dim = c.count_or("head_dim", d_model / n_heads.max(1))?;
    let key = |k: &str| format!("{}.{k}", arch.name());
    let u32v = |n: usize| Value::U32(n as u32);
    let mut m: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.name().into())),
        ("general.name".into(), Value::String(format!("Hugging Face {model_type}"))),
        (key("block_count"), u32v(n_layers)),
        (key("context_length"), u32v(c.count_or("max_position_embeddings", 4096)?)),
        (key("embedding_length"), u32v(d_model)),
        (key("feed_forward_length"), u32v(c.count("intermediate_size")?)),
        (key("attention.head_count"), u32v(n_heads)),
        (key("attention.head_count_kv"), u32v(n_kv_heads)),
        (key("attention.key_length"), u32v(head_dim)),
        (key("attention.value_length"), u32v(head_dim)),
        (key("vocab_size"), u32v(c.count("vocab_size")?)),
        (key("attention.layer_norm_rms_epsilon"), Value::F32(c.float_or("rms_norm_eps", 1e-6)? as f32)),
    ];
    if c.float_or("partial_rotary_factor", 1.0)? != 1.0 {
        return Err(bad("`partial_rotary_factor` ≠ 1 is not supported".into()));
    }
    let act = if arch == Arch::Gemma3 { ("hidden_activation", "gelu_pytorch_tanh") } else { ("hidden_act", "silu") };
    let found = c.str_or(act.0, act.1)?;
    if found != act.1 && !(arch == Arch::Gemma3 && found == "gelu_tanh") {
        return Err(bad(format!("`{}` = {found}: {} uses {}", act.0, arch.name(), act.1)));
    }
    for flag in ["mlp_bias", "use_sliding_window"] {
        if c.flag(flag, false)? {
            return Err(bad(format!("`{flag}` = true is not supported")));
        }
    }
    // Qwen 2 always has q/k/v biases; llama's optional ones are not in our llama.
    if arch != Arch::Qwen2 && c.flag("attention_bias", false)? {
        return Err(bad(format!("`attention_bias` = true is not supported for {}", arch.name())));
    }
    let mut llama3_rope = None;
    let (theta, scaling) = rope(&c, arch)?;
    m.push((key("rope.freq_base"), Value::F32(theta as f32)));
    match scaling {
        Scaling::None => {}
        Scaling::Linear(factor) => {
            m.push((key("rope.scaling.type"), Value::String("linear".into())));
            m.push((key("rope.scaling.factor"), Value::F32(factor as f32)));
        }
        Scaling::Llama3(r) if arch == Arch::Llama => llama3_rope = Some(Llama3Rope { theta, ..r }),
        Scaling::Llama3(_) => return Err(bad(format!("llama3 rope scaling on {} is not supported", arch.name()))),
    }
    if arch == Arch::Gemma3 {
        gemma3(&c, n_layers, d_model, n_heads, head_dim, &mut m)?;
    }
    // Gemma ties its output to the embeddings unless told otherwise; the others do not.
    let tied = c.flag("tie_word_embeddings", arch == Arch::Gemma3)? || Obj(root).flag("tie_word_embeddings", false)?;
    let bos_id = c.ids("bos_token_id")?.first().copied();
    Ok(HfConfig {
        arch,
        metadata: m,
        n_layers,
        n_heads,
        n_kv_heads,
        head_dim,
        tied,
        llama3_rope,
        eos_ids: c.ids("eos_token_id")?,
        bos_id,
    })
}

enum Scaling {
    None,
    Linear(f64),
    Llama3(Llama3Rope),
}

/// The global RoPE base and scaling: transformers 5 writes `rope_parameters` (per layer type for
/// Gemma 3), earlier versions `rope_theta` and `rope_scaling`.
fn rope(c: &Obj, arch: Arch) -> Result<(f64, Scaling)> {
    let params = c.present("rope_parameters").or(c.present("rope_scaling")).and_then(|v| v.as_object());
    let params = match params {
        Some(p) if arch == Arch::Gemma3 && p.contains_key("full_attention") => {
            let local = p.get("sliding_attention").and_then(|v| v.as_object());
            if let Some(local) = local {
                check_gemma_local(&Obj(local), "rope_parameters.sliding_attention")?;
            }
            p.get("full_attention").and_then(|v| v.as_object())
        }
        p => p,
    };
    let default_theta = c.float_or("rope_theta", 10000.0)?;
    let Some(p) = params.map(Obj) else { return Ok((default_theta, Scaling::None)) };
    let theta = p.float_or("rope_theta", default_theta)?;
    let kind = p.str_or("rope_type", p.str_or("type", "default")?)?;
    let factor = p.float_or("factor", 1.0)?;
    let scaling = match kind {
        "default" => Scaling::None,
        "linear" if factor > 0.0 => Scaling::Linear(factor),
        "llama3" => Scaling::Llama3(Llama3Rope {
            theta,
            factor,
            low_freq_factor: p.float_or("low_freq_factor", 1.0)?,
            high_freq_factor: p.float_or("high_freq_factor", 4.0)?,
            original_max: p.float_or("original_max_position_embeddings", 8192.0)?,
        }),
        other => {
            return Err(bad(format!(
                "rope_type `{other}` (factor {factor}) is not supported (default, linear, llama3 are)"
            )));
        }
    };
    Ok((theta, scaling))
}

/// Gemma 3's local layers: the engine's base 10000 and no scaling (config.rs `gemma3`).
fn check_gemma_local(p: &Obj, what: &str) -> Result<()> {
    let theta = p.float_or("rope_theta", 10000.0)?;
    let kind = p.str_or("rope_type", "default")?;
    if theta != 10000.0 || kind != "default" {
        return Err(bad(format!(
            "{what}: rope base {theta} ({kind}); the engine's Gemma 3 local layers use 10000, unscaled"
        )));
    }
    Ok(())
}

/// Gemma 3: the window, and the settings the engine hard-codes, checked.
fn gemma3(
    c: &Obj,
    n_layers: usize,
    d_model: usize,
    n_heads: usize,
    head_dim: usize,
    m: &mut Vec<(String, Value)>,
) -> Result<()> {
    if c.present("rope_local_base_freq").is_some() {
        let theta = c.float_or("rope_local_base_freq", 10000.0)?;
        if theta != 10000.0 {
            return Err(bad(format!("rope_local_base_freq {theta}: the engine's Gemma 3 local layers use 10000")));
        }
    }
    for k in ["final_logit_softcapping", "attn_logit_softcapping"] {
        if c.present(k).is_some() {
            return Err(bad(format!("`{k}` is set: logit softcapping is not supported")));
        }
    }
    let expected = if n_layers == 62 { d_model / n_heads } else { head_dim };
    let scalar = c.float_or("query_pre_attn_scalar", expected as f64)?;
    if scalar != expected as f64 {
        return Err(bad(format!("query_pre_attn_scalar {scalar}: the engine's Gemma 3 uses {expected} at this shape")));
    }
    if let Some(window) = c.present("sliding_window") {
        let w = window
            .as_u64()
            .filter(|&w| w > 0 && w <= 1 << 24)
            .ok_or_else(|| bad(format!("sliding_window = {window}")))?;
        m.push(("gemma3.attention.sliding_window".into(), Value::U32(w as u32)));
        // Every 6th layer global, as config.rs hard-codes; a file that says otherwise is refused.
        if let Some(types) = c.present("layer_types").and_then(|v| v.as_array()) {
            let expect = |i: usize| if i % 6 == 5 { "full_attention" } else { "sliding_attention" };
            let ok = types.len() == n_layers && types.iter().enumerate().all(|(i, t)| t.as_str() == Some(expect(i)));
            if !ok {
                return Err(bad("layer_types differ from Gemma 3's pattern (every 6th layer global)".into()));
            }
        }
    }
    Ok(())
}
