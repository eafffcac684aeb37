//! Model hyperparameters, read from GGUF metadata (`<arch>.*` keys, as llama.cpp writes them).
//! Settings a GGUF file does not carry follow what the reference implementations hard-code
//! (llama.cpp `src/llama-model.cpp` and `src/models/*.cpp`, HF transformers `modeling_*.py`);
//! each is named where it is set (`gemma3`).

use crate::backend::{Rope, RopeStyle};
use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// The architectures this engine runs: decoder-only transformers with RMSNorm, RoPE, GQA
/// attention and a gated MLP. qwen2 adds q/k/v biases; qwen3 per-head q/k norms; gemma3 q/k
/// norms, post-norms, a GELU gate, scaled embeddings and interleaved sliding-window layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }
}

/// The gate's nonlinearity in the feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) · up (SwiGLU: llama, qwen).
    Silu,
    /// gelu_tanh(gate) · up (GeGLU: gemma).
    GeluTanh,
}

/// What differs between the layers of one model: the attention window and its RoPE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerAttention {
    /// Keys a token sees (itself included), `None` for global attention.
    pub window: Option<usize>,
    pub rope: Rope,
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
    /// The RoPE of global layers (every layer of a model without sliding windows).
    pub rope: Rope,
    /// The context the model was trained for (`<arch>.context_length`).
    pub context_length: usize,
    pub activation: Activation,
    /// Multiplies the embedding rows (gemma: sqrt(d_model); others 1).
    pub embed_scale: f32,
    /// Multiplies q·k before the softmax.
    pub attn_scale: f32,
    /// Per-head RMSNorm of q and k before RoPE (`attn_q_norm`, `attn_k_norm`: qwen3, gemma3).
    pub qk_norm: bool,
    /// RMSNorm of each sublayer's output before the residual add (`post_attention_norm`,
    /// `post_ffw_norm`: gemma3).
    pub post_norms: bool,
    /// q/k/v biases where the file has them (qwen2).
    pub qkv_bias: bool,
    /// Per layer: window and RoPE. `n_layers` entries.
    pub layers: Vec<LayerAttention>,
}

/// Reads `<arch>.*` keys with the checks every count needs.
struct Keys<'a> {
    gguf: &'a Gguf,
    arch: &'static str,
}

impl Keys<'_> {
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }
    fn has(&self, k: &str) -> bool {
        self.gguf.get(&self.key(k)).is_some()
    }
    fn int(&self, k: &str) -> Result<usize> {
        let key = self.key(k);
        let v = self.gguf.get(&key).ok_or_else(|| Error::Metadata(format!("{key} is missing")))?;
        v.as_u64()
            .filter(|&n| n > 0 && n <= 1 << 24)
            .map(|n| n as usize)
            .ok_or_else(|| Error::Metadata(format!("{key} = {v} is not a positive count")))
    }
    fn int_or(&self, k: &str, default: usize) -> Result<usize> {
        if self.has(k) { self.int(k) } else { Ok(default) }
    }
    fn float(&self, k: &str, default: f32) -> Result<f32> {
        let key = self.key(k);
        match self.gguf.get(&key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .map(|v| v as f32)
                .filter(|v| v.is_finite())
                .ok_or_else(|| Error::Metadata(format!("{key} = {v} is not a finite number"))),
        }
    }
}

impl Config {
    pub fn from_gguf(gguf: &Gguf) -> Result<Config> {
        let arch_name = match gguf.get("general.architecture") {
            None => return Err(Error::Metadata("general.architecture is missing".into())),
            Some(v) => {
                v.as_str().ok_or_else(|| Error::Metadata(format!("general.architecture = {v} is not a string")))?
            }
        };
        let arch = Arch::ALL.into_iter().find(|a| a.name() == arch_name).ok_or_else(|| {
            let known: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
            Error::Metadata(format!("architecture `{arch_name}` is not supported ({} are)", known.join(", ")))
        })?;
        let m = Keys { gguf, arch: arch.name() };
        let n_layers = m.int("block_count")?;
        // Each block has several tensors: a larger count is not this file's, and would size the
        // per-layer tables (and the KV cache) from a hostile number.
        if n_layers > gguf.tensors.len() {
            return Err(Error::Metadata(format!(
                "{} = {n_layers}, but the file has only {} tensors",
                m.key("block_count"),
                gguf.tensors.len()
            )));
        }
        let d_model = m.int("embedding_length")?;
        let d_ff = m.int("feed_forward_length")?;
        let n_heads = m.int("attention.head_count")?;
        let n_kv_heads = m.int_or("attention.head_count_kv", n_heads)?;
        let head_dim = m.int_or("attention.key_length", d_model / n_heads)?;
        if n_heads % n_kv_heads != 0 || head_dim % 2 != 0 || head_dim == 0 {
            return Err(Error::Metadata(format!(
                "{n_heads} heads, {n_kv_heads} kv heads, head_dim {head_dim}: heads must be a multiple of kv heads and head_dim even"
            )));
        }
        if m.int_or("attention.value_length", head_dim)? != head_dim {
            return Err(Error::Metadata(format!(
                "{} differs from key_length {head_dim} (separate K and V head sizes are not supported)",
                m.key("attention.value_length")
            )));
        }
        let vocab_size = match gguf.get(&m.key("vocab_size")) {
            Some(_) => m.int("vocab_size")?,
            None => gguf
                .get("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(|a| a.len())
                .ok_or_else(|| Error::Metadata("neither vocab_size nor tokenizer.ggml.tokens is present".into()))?,
        };
        let n_rot = m.int_or("rope.dimension_count", head_dim)?;
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(Error::Metadata(format!(
                "rope.dimension_count {n_rot} must be even and ≤ head_dim {head_dim}"
            )));
        }
        // As llama.cpp's load_hparams: a missing type is linear, the factor is `rope.scaling.factor`
        // or the older `rope.scale_linear`, and a factor of 0 (or none) means no scaling. Llama 3's
        // scaling is no type: its converter writes the `rope_freqs` tensor instead (weights.rs).
        let factor_key = if m.has("rope.scaling.factor") { "rope.scaling.factor" } else { "rope.scale_linear" };
        let freq_scale = match gguf.get(&m.key("rope.scaling.type")).and_then(|v| v.as_str()) {
            Some("none") => 1.0,
            None | Some("linear") => match m.float(factor_key, 0.0)? {
                0.0 => 1.0,
                factor => 1.0 / factor,
            },
            Some(other) => {
                return Err(Error::Metadata(format!(
                    "rope scaling `{other}` ({}) is not supported (none, linear are)",
                    m.key("rope.scaling.type")
                )));
            }
        };
        if !(freq_scale.is_finite() && freq_scale > 0.0) {
            return Err(Error::Metadata(format!("rope.scaling.factor gives a position scale of {freq_scale}")));
        }
        // llama.cpp's llama_model_rope_type: llama rotates adjacent pairs, qwen2/qwen3/gemma3 halves.
        let style = if arch == Arch::Llama { RopeStyle::Normal } else { RopeStyle::Neox };
        let rope = Rope { head_dim, n_rot, theta: m.float("rope.freq_base", 10000.0)?, freq_scale, style };
        let mut config = Config {
            arch,
            n_layers,
            d_model,
            d_ff,
            n_heads,
            n_kv_heads,
            head_dim,
            vocab_size,
            norm_eps: m.float("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope,
            context_length: m.int("context_length")?,
            activation: Activation::Silu,
            embed_scale: 1.0,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            qk_norm: arch == Arch::Qwen3,
            post_norms: false,
            qkv_bias: arch == Arch::Qwen2,
            layers: vec![LayerAttention { window: None, rope }; n_layers],
        };
        if arch == Arch::Gemma3 {
            gemma3(&m, &mut config)?;
        }
        Ok(config)
    }

    /// Width of the K (and V) rows: all KV heads of one token.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Width of the Q rows: all query heads of one token.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// The longest window of the first `depth` layers, `None` when one of them attends
    /// globally: how many of a sequence's latest positions a cache of those layers must keep.
    pub fn max_window(&self, depth: usize) -> Option<usize> {
        self.layers.iter().take(depth).try_fold(0, |max, l| l.window.map(|w| max.max(w)))
    }
}

/// Gemma 3's settings. From the GGUF: sizes, eps, `attention.sliding_window`, the global RoPE base
/// and scaling. Not in the GGUF, as the references hard-code them:
/// - every 6th layer (i % 6 == 5) is global, the rest sliding-window: llama.cpp
///   `hparams.set_swa_pattern(6)` (`is_swa = il % 6 < 5`), HF `sliding_window_pattern = 6`;
/// - local layers' RoPE base 10000 and scale 1: llama.cpp `rope_freq_base_train_swa = 10000`,
///   `rope_freq_scale_train_swa = 1`, HF `rope_local_base_freq = 10000`;
/// - attention scale query_pre_attn_scalar^-0.5 with query_pre_attn_scalar = head_dim, but
///   d_model / n_heads for the 27B model (62 layers): llama.cpp `f_attention_scale` (no GGUF key
///   carries it), matching HF configs (270M: 256 = head_dim; 27B: 168 = 5376 / 32);
/// - embeddings times sqrt(d_model) (llama.cpp `ggml_scale(inpL, sqrtf(n_embd))`, HF
///   `Gemma3TextScaledWordEmbedding`), GELU-tanh gate (HF `gelu_pytorch_tanh`, llama.cpp
///   `LLM_FFN_GELU`), q/k norms and post-norms (llama.cpp `src/models/gemma3.cpp`).
///
/// Norm gains are used as stored: llama.cpp's converter already adds Gemma's 1 to every
/// `*norm.weight` (convert_hf_to_gguf.py `Gemma3Model.norm_shift = 1.0`), so the file holds
/// 1 + w, which HF's `Gemma3RMSNorm` computes at run time. Final-logit softcapping (Gemma 2) is
/// absent in Gemma 3; a file that sets it is refused rather than run without it.
fn gemma3(m: &Keys, c: &mut Config) -> Result<()> {
    const SWA_PATTERN: usize = 6;
    const LOCAL_ROPE_BASE: f32 = 10000.0;
    const LAYERS_27B: usize = 62;
    if m.float("final_logit_softcapping", 0.0)? != 0.0 {
        return Err(Error::Metadata(format!(
            "{} is set: logit softcapping is not supported",
            m.key("final_logit_softcapping")
        )));
    }
    c.activation = Activation::GeluTanh;
    c.embed_scale = (c.d_model as f32).sqrt();
    let query_pre_attn_scalar = if c.n_layers == LAYERS_27B { c.d_model / c.n_heads } else { c.head_dim };
    c.attn_scale = 1.0 / (query_pre_attn_scalar as f32).sqrt();
    c.qk_norm = true;
    c.post_norms = true;
    // llama.cpp reads the window as optional: without one (or 0) every layer is global.
    let zero = m.gguf.get(&m.key("attention.sliding_window")).and_then(|v| v.as_u64()) == Some(0);
    let window =
        if m.has("attention.sliding_window") && !zero { Some(m.int("attention.sliding_window")?) } else { None };
    if let Some(window) = window {
        let local = Rope { theta: LOCAL_ROPE_BASE, freq_scale: 1.0, ..c.rope };
        for (i, layer) in c.layers.iter_mut().enumerate() {
            if i % SWA_PATTERN < SWA_PATTERN - 1 {
                *layer = LayerAttention { window: Some(window), rope: local };
            }
        }
    }
    Ok(())
}
