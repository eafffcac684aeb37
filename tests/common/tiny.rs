//! A tiny random model built in memory (F32 weights, no tokenizer), for tests of the mechanics
//! that do not need a real model: cache paging, batching, speculative sampling, and each
//! architecture's forward pass against a float64 one (tests/forward_reference.rs).

use std::sync::Arc;

use ultra::Format;
use ultra::gguf::{Gguf, GgufWriter, Value};

pub struct TinySpec {
    pub n_layers: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub vocab: usize,
    pub context: usize,
    pub seed: u64,
    /// Multiplies the output projection: larger makes the next-token distribution peakier.
    pub logit_scale: f32,
    /// `llama`, `qwen2` (q/k/v biases, NeoX RoPE), `qwen3` (q/k norms, NeoX RoPE) or `gemma3`
    /// (q/k norms, post-norms, tied output, sliding windows of `window` keys, RoPE base 1e6 on
    /// its global layers).
    pub arch: &'static str,
    /// gemma3's `attention.sliding_window`.
    pub window: usize,
    /// Writes `rope_freqs.weight` (Llama 3's per-pair frequency factors, 1 to 8).
    pub rope_freqs: bool,
}

/// The tiny model's `rope_freqs` for head size `hd`: 1 for the fastest pair, 8 for the slowest.
pub fn tiny_rope_freqs(hd: usize) -> Vec<f32> {
    (0..hd / 2).map(|i| 1.0 + 7.0 * i as f32 / (hd / 2 - 1).max(1) as f32).collect()
}

impl Default for TinySpec {
    fn default() -> Self {
        TinySpec {
            n_layers: 2,
            d_model: 32,
            d_ff: 64,
            n_heads: 4,
            n_kv_heads: 2,
            vocab: 16,
            context: 256,
            seed: 1,
            logit_scale: 1.0,
            arch: "llama",
            window: 4,
            rope_freqs: false,
        }
    }
}

/// splitmix64: small, seeded, good enough for test weights.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn matrix(rng: &mut Rng, rows: usize, cols: usize, scale: f32) -> Vec<u8> {
    (0..rows * cols).flat_map(|_| (rng.uniform() * scale).to_le_bytes()).collect()
}

fn norm(rng: &mut Rng, d: usize) -> Vec<u8> {
    (0..d).flat_map(|_| (1.0 + 0.1 * rng.uniform()).to_le_bytes()).collect()
}

pub fn tiny_gguf(spec: &TinySpec) -> Gguf {
    let mut rng = Rng(spec.seed);
    let (d, ff, hd) = (spec.d_model, spec.d_ff, spec.d_model / spec.n_heads);
    let kv = spec.n_kv_heads * hd;
    let mut w = GgufWriter::new();
    let a = spec.arch;
    w.meta("general.architecture", Value::String(a.into()))
        .meta(&format!("{a}.block_count"), Value::U32(spec.n_layers as u32))
        .meta(&format!("{a}.context_length"), Value::U32(spec.context as u32))
        .meta(&format!("{a}.embedding_length"), Value::U32(d as u32))
        .meta(&format!("{a}.feed_forward_length"), Value::U32(ff as u32))
        .meta(&format!("{a}.attention.head_count"), Value::U32(spec.n_heads as u32))
        .meta(&format!("{a}.attention.head_count_kv"), Value::U32(spec.n_kv_heads as u32))
        .meta(&format!("{a}.rope.freq_base"), Value::F32(if a == "gemma3" { 1e6 } else { 10000.0 }))
        .meta(&format!("{a}.attention.layer_norm_rms_epsilon"), Value::F32(1e-5))
        .meta(&format!("{a}.vocab_size"), Value::U32(spec.vocab as u32));
    if a == "gemma3" {
        w.meta("gemma3.attention.sliding_window", Value::U32(spec.window as u32));
    }
    let (qk_norms, gemma) = (a == "qwen3" || a == "gemma3", a == "gemma3");
    let s = 1.0 / (d as f32).sqrt();
    w.tensor("token_embd.weight", Format::F32, spec.vocab, d, matrix(&mut rng, spec.vocab, d, 1.0));
    for i in 0..spec.n_layers {
        let n = |x: &str| format!("blk.{i}.{x}.weight");
        w.tensor(&n("attn_norm"), Format::F32, 1, d, norm(&mut rng, d));
        w.tensor(&n("attn_q"), Format::F32, d, d, matrix(&mut rng, d, d, s));
        w.tensor(&n("attn_k"), Format::F32, kv, d, matrix(&mut rng, kv, d, s));
        w.tensor(&n("attn_v"), Format::F32, kv, d, matrix(&mut rng, kv, d, s));
        w.tensor(&n("attn_output"), Format::F32, d, d, matrix(&mut rng, d, d, s));
        if a == "qwen2" {
            for (name, len) in [("attn_q", d), ("attn_k", kv), ("attn_v", kv)] {
                w.tensor(&format!("blk.{i}.{name}.bias"), Format::F32, 1, len, matrix(&mut rng, 1, len, 0.5));
            }
        }
        if qk_norms {
            w.tensor(&n("attn_q_norm"), Format::F32, 1, hd, norm(&mut rng, hd));
            w.tensor(&n("attn_k_norm"), Format::F32, 1, hd, norm(&mut rng, hd));
        }
        if gemma {
            w.tensor(&n("post_attention_norm"), Format::F32, 1, d, norm(&mut rng, d));
            w.tensor(&n("post_ffw_norm"), Format::F32, 1, d, norm(&mut rng, d));
        }
        w.tensor(&n("ffn_norm"), Format::F32, 1, d, norm(&mut rng, d));
        w.tensor(&n("ffn_gate"), Format::F32, ff, d, matrix(&mut rng, ff, d, s));
        w.tensor(&n("ffn_up"), Format::F32, ff, d, matrix(&mut rng, ff, d, s));
        w.tensor(&n("ffn_down"), Format::F32, d, ff, matrix(&mut rng, d, ff, 1.0 / (ff as f32).sqrt()));
    }
    w.tensor("output_norm.weight", Format::F32, 1, d, norm(&mut rng, d));
    if spec.rope_freqs {
        let ff: Vec<u8> = tiny_rope_freqs(hd).iter().flat_map(|v| v.to_le_bytes()).collect();
        w.tensor("rope_freqs.weight", Format::F32, 1, hd / 2, ff);
    }
    if !gemma {
        w.tensor("output.weight", Format::F32, spec.vocab, d, matrix(&mut rng, spec.vocab, d, spec.logit_scale));
    }
    Gguf::parse(Arc::new(w.to_bytes())).expect("tiny model parses")
}
