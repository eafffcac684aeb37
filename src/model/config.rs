//! Model hyperparameters, read from GGUF metadata (`<arch>.*` keys, as llama.cpp writes them).

use crate::backend::{Rope, RopeStyle};
use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// The architectures this engine runs. Both are pre-norm decoder-only transformers with RMSNorm,
/// RoPE, GQA attention and a SwiGLU MLP; qwen2 adds q/k/v biases and rotates NeoX-style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub arch: Arch,
    pub n_layers: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub norm_eps: f32,
    pub rope: Rope,
    /// The context the model was trained for (`<arch>.context_length`).
    pub context_length: usize,
}

impl Config {
    pub fn from_gguf(gguf: &Gguf) -> Result<Config> {
        let arch_name = gguf
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Metadata("general.architecture is missing".into()))?;
        let arch = match arch_name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            other => {
                return Err(Error::Metadata(format!("architecture `{other}` is not supported (llama, qwen2 are)")));
            }
        };
        let key = |k: &str| format!("{arch_name}.{k}");
        let int = |k: &str| -> Result<usize> {
            let v = gguf.get(&key(k)).ok_or_else(|| Error::Metadata(format!("{} is missing", key(k))))?;
            v.as_u64()
                .filter(|&n| n > 0 && n <= 1 << 24)
                .map(|n| n as usize)
                .ok_or_else(|| Error::Metadata(format!("{} = {v} is not a positive count", key(k))))
        };
        let n_layers = int("block_count")?;
        let d_model = int("embedding_length")?;
        let d_ff = int("feed_forward_length")?;
        let n_heads = int("attention.head_count")?;
        let n_kv_heads =
            if gguf.get(&key("attention.head_count_kv")).is_some() { int("attention.head_count_kv")? } else { n_heads };
        let head_dim = match gguf.get(&key("attention.key_length")) {
            Some(_) => int("attention.key_length")?,
            None => d_model / n_heads,
        };
        if n_heads % n_kv_heads != 0 || head_dim % 2 != 0 || head_dim == 0 {
            return Err(Error::Metadata(format!(
                "{n_heads} heads, {n_kv_heads} kv heads, head_dim {head_dim}: heads must be a multiple of kv heads and head_dim even"
            )));
        }
        let vocab_size = match gguf.get(&key("vocab_size")) {
            Some(_) => int("vocab_size")?,
            None => gguf
                .get("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(|a| a.len())
                .ok_or_else(|| Error::Metadata("neither vocab_size nor tokenizer.ggml.tokens is present".into()))?,
        };
        let float = |k: &str, default: f32| -> f32 {
            gguf.get(&key(k)).and_then(|v| v.as_f64()).map(|v| v as f32).unwrap_or(default)
        };
        let norm_eps = float("attention.layer_norm_rms_epsilon", 1e-5);
        let n_rot = match gguf.get(&key("rope.dimension_count")) {
            Some(_) => int("rope.dimension_count")?,
            None => head_dim,
        };
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(Error::Metadata(format!(
                "rope.dimension_count {n_rot} must be even and ≤ head_dim {head_dim}"
            )));
        }
        let freq_scale = match gguf.get(&key("rope.scaling.type")).and_then(|v| v.as_str()) {
            None | Some("none") => 1.0,
            Some("linear") => 1.0 / float("rope.scaling.factor", 1.0),
            Some(other) => {
                return Err(Error::Metadata(format!("rope scaling `{other}` is not supported (none, linear are)")));
            }
        };
        let rope = Rope {
            head_dim,
            n_rot,
            theta: float("rope.freq_base", 10000.0),
            freq_scale,
            style: if arch == Arch::Qwen2 { RopeStyle::Neox } else { RopeStyle::Normal },
        };
        let context_length = int("context_length")?;
        Ok(Config {
            arch,
            n_layers,
            d_model,
            d_ff,
            n_heads,
            n_kv_heads,
            head_dim,
            vocab_size,
            norm_eps,
            rope,
            context_length,
        })
    }

    /// Width of the K (and V) rows: all KV heads of one token.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Width of the Q rows: all query heads of one token.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
}
