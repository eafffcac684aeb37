//! `ultra synth`: a llama-architecture GGUF with random weights in the shape of a real model, for
//! benchmarks and tests without downloads. Metadata keys and tensor names are llama.cpp's.
//!
//! Weights are generated and quantized tensor by tensor, a slab of rows at a time, in parallel
//! (rayon), and streamed to the file after a header computed up front: memory stays at a few
//! slabs even for llama-8b (16 GB at F16). Every row has its own PRNG stream seeded from
//! (seed, tensor, row), so the bytes depend only on the seed, never on the thread count.
//!
//! Weights are one format throughout (norms stay F32), or a k-quant mix (`q4_k_m`, ...) with each
//! tensor's type chosen as `llama-quantize` chooses it (`quant::kquant::mix`).
//!
//! Values: matrices are normal-ish (sum of four uniforms) with std = min(0.02, 1/sqrt(fan_in)),
//! so each projection roughly keeps the RMS of its input; norm gains are uniform in [0.95, 1.05].
//! The tokenizer is byte-level GPT-2: token b (0..256) is byte b's `bytes_to_unicode` character,
//! then `<|endoftext|>` (bos and eos), then `<|synth_N|>` control tokens up to the vocab size.

use std::io::BufWriter;
use std::path::Path;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gguf::{GgufWriter, TensorStream, Value, ValueType};
use crate::quant::kquant::mix::{Mix, MixModel};
use crate::quant::target::Target;
use crate::quant::{Format, quantize_row_into};

/// What `ultra synth --type` writes: one format for every matrix, or a k-quant mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightType {
    Pure(Format),
    Mix(Mix),
}

impl From<Format> for WeightType {
    fn from(format: Format) -> WeightType {
        WeightType::Pure(format)
    }
}

impl WeightType {
    /// A mix name (`q4_k_m`, `q5_k_m`, `q6_k`, `q2_k`, `q3_k_m`: `q6_k` and `q2_k` name the mixes,
    /// as in `llama-quantize`), else a format name (`q4_0`, `q4_k`, `f16`, ...).
    pub fn parse(name: &str) -> Option<WeightType> {
        Mix::parse(name).map(WeightType::Mix).or_else(|| Format::parse(name).map(WeightType::Pure))
    }

    pub fn name(self) -> String {
        match self {
            WeightType::Pure(f) => f.name().to_string(),
            WeightType::Mix(m) => m.name().to_uppercase(),
        }
    }
}

/// The shape of a llama-architecture model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preset {
    pub name: &'static str,
    pub n_layers: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    /// The output projection is token_embd (no `output.weight`).
    pub tied_embeddings: bool,
    pub rope_theta: f32,
    pub context: usize,
    pub rms_eps: f32,
}

/// smollm2-135m, llama-1b (Llama-3.2-1B), llama-8b (Llama-3.1-8B), and `tiny` and `tiny-256`
/// for fast tests (`tiny-256`'s rows are 256 or 512 wide, so k-quant mixes keep their super-blocks).
pub const PRESETS: [Preset; 5] = [
    Preset {
        name: "smollm2-135m",
        n_layers: 30,
        d_model: 576,
        d_ff: 1536,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        vocab: 49152,
        tied_embeddings: true,
        rope_theta: 100000.0,
        context: 8192,
        rms_eps: 1e-5,
    },
    Preset {
        name: "llama-1b",
        n_layers: 16,
        d_model: 2048,
        d_ff: 8192,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 64,
        vocab: 128256,
        tied_embeddings: true,
        rope_theta: 500000.0,
        context: 131072,
        rms_eps: 1e-5,
    },
    Preset {
        name: "llama-8b",
        n_layers: 32,
        d_model: 4096,
        d_ff: 14336,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 128,
        vocab: 128256,
        tied_embeddings: false,
        rope_theta: 500000.0,
        context: 131072,
        rms_eps: 1e-5,
    },
    Preset {
        name: "tiny",
        n_layers: 2,
        d_model: 64,
        d_ff: 128,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 16,
        vocab: 320,
        tied_embeddings: false,
        rope_theta: 10000.0,
        context: 256,
        rms_eps: 1e-5,
    },
    Preset {
        name: "tiny-256",
        n_layers: 4,
        d_model: 256,
        d_ff: 512,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        vocab: 320,
        tied_embeddings: false,
        rope_theta: 10000.0,
        context: 256,
        rms_eps: 1e-5,
    },
];

impl Preset {
    pub fn get(name: &str) -> Result<&'static Preset> {
        PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            Error::InvalidArgument(format!("unknown synth preset `{name}` (known: {})", names.join(", ")))
        })
    }

    /// Every tensor in file order: (name, format, rows, cols, init).
    pub fn tensors(&self, weights: impl Into<WeightType>) -> Vec<TensorSpec> {
        let weights = weights.into();
        let (d, q, kv, ff) = (self.d_model, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim, self.d_ff);
        let model = MixModel {
            n_layers: self.n_layers,
            n_gqa: self.n_heads / self.n_kv_heads,
            tied_embeddings: self.tied_embeddings,
        };
        let matrix = |name: String, rows: usize, cols: usize| {
            let format = match weights {
                WeightType::Pure(format) => format,
                WeightType::Mix(mix) => mix.tensor_format(&name, cols, &model),
            };
            TensorSpec { name, format, rows, cols, init: Init::Matrix }
        };
        let norm = |name: String| TensorSpec { name, format: Format::F32, rows: 1, cols: d, init: Init::Norm };
        let mut specs = vec![TensorSpec { init: Init::Embedding, ..matrix("token_embd.weight".into(), self.vocab, d) }];
        for i in 0..self.n_layers {
            specs.push(norm(format!("blk.{i}.attn_norm.weight")));
            specs.push(matrix(format!("blk.{i}.attn_q.weight"), q, d));
            specs.push(matrix(format!("blk.{i}.attn_k.weight"), kv, d));
            specs.push(matrix(format!("blk.{i}.attn_v.weight"), kv, d));
            specs.push(matrix(format!("blk.{i}.attn_output.weight"), d, q));
            specs.push(norm(format!("blk.{i}.ffn_norm.weight")));
            specs.push(matrix(format!("blk.{i}.ffn_gate.weight"), ff, d));
            specs.push(matrix(format!("blk.{i}.ffn_up.weight"), ff, d));
            specs.push(matrix(format!("blk.{i}.ffn_down.weight"), d, ff));
        }
        specs.push(norm("output_norm.weight".into()));
        if !self.tied_embeddings {
            specs.push(matrix("output.weight".into(), self.vocab, d));
        }
        specs
    }
}

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal-ish, std 0.02.
    Embedding,
    /// Normal-ish, std min(0.02, 1/sqrt(cols)).
    Matrix,
    /// Uniform in [0.95, 1.05].
    Norm,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    pub init: Init,
}

/// Writes a llama-architecture GGUF with random weights in `weights` (a format, or a k-quant mix;
/// norms stay F32).
pub fn synth_gguf(arch: &str, preset: &str, weights: impl Into<WeightType>, seed: u64, out: &Path) -> Result<()> {
    let weights = weights.into();
    if arch != "llama" {
        return Err(Error::InvalidArgument(format!("synth writes the `llama` architecture only, not `{arch}`")));
    }
    let preset = Preset::get(preset)?;
    let specs = preset.tensors(weights);
    let mut writer = GgufWriter::new();
    write_metadata(&mut writer, preset, weights);
    // Files with the group-wise formats declare their layout version (the loader refuses them otherwise).
    if specs.iter().any(|s| matches!(s.format, Format::Intn(_))) {
        writer.meta(crate::quant::intn::VERSION_KEY, Value::U32(crate::quant::intn::VERSION));
    }
    for s in &specs {
        writer.declare_tensor(&s.name, s.format, s.rows, s.cols)?;
    }
    let with_path = |e: Error| match e {
        Error::Io(source) => Error::File { path: out.to_path_buf(), source },
        other => other,
    };
    let file = std::fs::File::create(out).map_err(Error::file(out))?;
    let mut stream = writer.stream(BufWriter::with_capacity(1 << 20, file)).map_err(with_path)?;
    for (index, spec) in specs.iter().enumerate() {
        write_tensor(&mut stream, spec, seed, index as u64).map_err(with_path)?;
    }
    // finish flushes the BufWriter; no fsync: the file is a reproducible artifact, not a record.
    stream.finish().map_err(with_path)?;
    Ok(())
}

/// llama.cpp's `llama_ftype` of the file (`ultra quantize`'s rule); ours have none: the type id
/// itself (llama.cpp refuses such files anyway).
fn file_type(weights: WeightType) -> u32 {
    let target = match weights {
        WeightType::Pure(format) => Target::Pure(format),
        WeightType::Mix(mix) => Target::Mix(mix),
    };
    match (target.file_type(), weights) {
        (Some(t), _) => t,
        (None, WeightType::Pure(Format::Intn(f))) => f.type_id(),
        (None, _) => 0,
    }
}

fn write_metadata(w: &mut GgufWriter, p: &Preset, weights: WeightType) {
    let u32_of = |v: usize| Value::U32(v as u32);
    w.meta("general.architecture", Value::String("llama".into()))
        .meta("general.name", Value::String(format!("synth-{}", p.name)))
        .meta("general.file_type", Value::U32(file_type(weights)))
        .meta("general.alignment", Value::U32(32))
        .meta("llama.block_count", u32_of(p.n_layers))
        .meta("llama.context_length", u32_of(p.context))
        .meta("llama.embedding_length", u32_of(p.d_model))
        .meta("llama.feed_forward_length", u32_of(p.d_ff))
        .meta("llama.attention.head_count", u32_of(p.n_heads))
        .meta("llama.attention.head_count_kv", u32_of(p.n_kv_heads))
        .meta("llama.rope.freq_base", Value::F32(p.rope_theta))
        .meta("llama.rope.dimension_count", u32_of(p.head_dim))
        .meta("llama.attention.layer_norm_rms_epsilon", Value::F32(p.rms_eps))
        .meta("llama.vocab_size", u32_of(p.vocab));
    let (tokens, types) = vocabulary(p.vocab);
    let eos = 256u32;
    // `gpt-2`, not `gpt2`: the spelling llama.cpp still knows (its GPT-2 split, ours too), so both
    // engines load the same synthetic file for side-by-side figures.
    w.meta("tokenizer.ggml.model", Value::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", Value::String("gpt-2".into()))
        .meta("tokenizer.ggml.tokens", Value::Array(ValueType::String, tokens.into_iter().map(Value::String).collect()))
        .meta("tokenizer.ggml.token_type", Value::Array(ValueType::I32, types.into_iter().map(Value::I32).collect()))
        .meta("tokenizer.ggml.merges", Value::Array(ValueType::String, Vec::new()))
        .meta("tokenizer.ggml.bos_token_id", Value::U32(eos))
        .meta("tokenizer.ggml.eos_token_id", Value::U32(eos));
}

/// GPT-2's `bytes_to_unicode`: printable bytes map to themselves, the other 68 to U+0100 onwards.
pub fn byte_to_unicode(b: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    if printable(b) {
        return b as char;
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).expect("U+0100..U+0143 are chars")
}

/// Token strings and types (1 normal, 3 control): bytes, `<|endoftext|>`, then filler.
pub fn vocabulary(vocab: usize) -> (Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_unicode(b).to_string()).collect();
    let mut types = vec![1; 256];
    tokens.push("<|endoftext|>".into());
    for n in 0..vocab.saturating_sub(257) {
        tokens.push(format!("<|synth_{n}|>"));
    }
    types.resize(tokens.len(), 3);
    (tokens, types)
}

/// Output bytes generated per slab (all threads together) before it is written.
const SLAB_BYTES: usize = 16 << 20;

fn write_tensor<W: std::io::Write>(
    stream: &mut TensorStream<W>,
    spec: &TensorSpec,
    seed: u64,
    index: u64,
) -> Result<()> {
    let row_bytes = spec.format.row_bytes(spec.cols)?;
    let slab_rows = (SLAB_BYTES / row_bytes).clamp(1, spec.rows);
    let mut slab = vec![0u8; slab_rows * row_bytes];
    for first in (0..spec.rows).step_by(slab_rows) {
        let n = slab_rows.min(spec.rows - first);
        slab[..n * row_bytes].par_chunks_mut(row_bytes).enumerate().for_each_init(
            || vec![0f32; spec.cols],
            |values, (i, out)| {
                fill_row(values, spec, seed, index, (first + i) as u64);
                quantize_row_into(spec.format, values, out);
            },
        );
        stream.write(&slab[..n * row_bytes])?;
    }
    Ok(())
}

/// splitmix64's output function: a bijective mix of all 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One row's values, from its own splitmix64 stream.
fn fill_row(values: &mut [f32], spec: &TensorSpec, seed: u64, tensor: u64, row: u64) {
    let mut state = mix(mix(seed ^ mix(tensor.wrapping_add(1))) ^ row.wrapping_mul(GOLDEN_GAMMA));
    let mut next = || {
        state = state.wrapping_add(GOLDEN_GAMMA);
        mix(state)
    };
    // Sum of four 16-bit uniforms: mean 2·65535, variance 4·65536²/12, so scale by √3/65536.
    let unit_normal = |r: u64| {
        let s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
        (s as f32 - 131070.0) * (1.732_050_8 / 65536.0)
    };
    match spec.init {
        Init::Norm => values.iter_mut().for_each(|v| *v = 0.95 + 0.1 * ((next() >> 40) as f32 / (1u64 << 24) as f32)),
        Init::Embedding | Init::Matrix => {
            let std = if spec.init == Init::Embedding { 0.02 } else { (1.0 / (spec.cols as f32).sqrt()).min(0.02) };
            values.iter_mut().for_each(|v| *v = std * unit_normal(next()));
        }
    }
}
