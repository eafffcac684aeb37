//! The commands of the `ultra` binary, one file each, and what they share: argument structs,
//! model loading, and the one place a backend name becomes a backend.

pub mod batch;
pub mod bench;
pub mod generate;
pub mod info;
pub mod models;
pub mod perplexity;
pub mod quantize;
pub mod request;
pub mod serve;
pub mod synth;
pub mod tokenize;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendName {
    Cpu,
    Wgpu,
    Cuda,
}

/// Calls `$body` with `$be` bound to the chosen backend. The only match on backend names.
macro_rules! with_backend {
    ($name:expr, |$be:ident| $body:expr) => {
        match $name {
            $crate::cli::BackendName::Cpu => {
                let $be = ultra::Cpu::new();
                $body
            }
            #[cfg(feature = "wgpu")]
            $crate::cli::BackendName::Wgpu => {
                let $be = ultra::Wgpu::new()?;
                $body
            }
            #[cfg(not(feature = "wgpu"))]
            $crate::cli::BackendName::Wgpu => Err(ultra::Error::BackendNotBuilt("wgpu").into()),
            #[cfg(feature = "cuda")]
            $crate::cli::BackendName::Cuda => {
                let $be = ultra::Cuda::new(0)?;
                $body
            }
            #[cfg(not(feature = "cuda"))]
            $crate::cli::BackendName::Cuda => Err(ultra::Error::BackendNotBuilt("cuda").into()),
        }
    };
}
pub(crate) use with_backend;

/// Where the model comes from: `--model PATH|NAME`, or the default model (fetched on first use).
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// A GGUF file, or a known model name (`ultra models` lists them: smollm2-135m, the default,
    /// and gemma3-270m), fetched and cached on first use.
    /// A Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json) works too.
    #[arg(long, value_name = "PATH|NAME")]
    pub model: Option<String>,
    /// Quantize a checkpoint directory's matrices on load, as `ultra quantize --to` would (the
    /// same names: int8, int4, int2, nf4, nf4_dq at their default group size or spelled out as
    /// int4_g64; q4_0 ... q8_0, q2_k ... q6_k, q4_k_m; f16, bf16); the embeddings and output
    /// keep at least 8 bits.
    #[arg(long, value_name = "FORMAT")]
    pub quantize: Option<String>,
}

impl ModelArgs {
    /// The model file's path, fetching a known model into the cache first if need be.
    pub fn path(&self) -> Result<PathBuf> {
        Ok(match &self.model {
            Some(model) => ultra::fetch::resolve(model)?,
            None => ultra::fetch::default_model()?,
        })
    }

    pub fn open(&self) -> Result<Gguf> {
        let path = self.path()?;
        let quantize = match &self.quantize {
            None => None,
            Some(name) => {
                Some(ultra::quant::target::Target::parse(name, None).with_context(|| format!("--quantize {name}"))?)
            }
        };
        ultra::hf::open_model(&path, quantize).with_context(|| format!("loading {}", path.display()))
    }
}

#[derive(Args, Clone, Debug)]
pub struct ModelsArgs {
    /// Fetch this known model into the cache now (repeatable; `all` for every one).
    #[arg(long, value_name = "NAME")]
    pub fetch: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt. Special tokens written in it (`<|im_start|>`) are recognized.
    #[arg(long, required_unless_present = "prompts_file", conflicts_with = "prompts_file")]
    pub prompt: Option<String>,
    /// JSON lines, `{"prompt": "..."}` each: run them together with continuous batching.
    #[arg(long)]
    pub prompts_file: Option<PathBuf>,
    /// Most sequences decoded together with --prompts-file.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
    #[arg(long, default_value_t = 128)]
    pub max_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    /// 1.0 = off.
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = BackendName::Cpu)]
    pub backend: BackendName,
    /// Wrap the prompt in the model's chat template as a user message.
    #[arg(long)]
    pub chat: bool,
    /// Print one JSON object at the end and nothing else on stdout.
    #[arg(long)]
    pub json: bool,
    /// Context size in tokens (default: the model's, at most 4096).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Prompt tokens per forward pass.
    #[arg(long, default_value_t = 512)]
    pub batch: usize,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
    #[command(flatten)]
    pub offload: OffloadArgs,
}

/// Layer offload: how many layers stay on the GPU, the rest streamed from host memory.
#[derive(Args, Clone, Debug)]
pub struct OffloadArgs {
    /// Layers kept on the GPU, as llama.cpp's -ngl; the others live in host memory and stream
    /// through a ring of --prefetch device slots every forward pass (cuda, wgpu).
    #[arg(long, value_name = "N")]
    pub gpu_layers: Option<usize>,
    /// Device memory budget for weights and KV cache (B, KB/MB/GB = powers of 1000, KiB/MiB/GiB):
    /// as many layers stay resident as fit beside the ring; the rest stream.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub gpu_memory: Option<u64>,
    /// Streamed layers in flight (the ring's depth).
    #[arg(long, default_value_t = ultra::model::placement::DEFAULT_PREFETCH)]
    pub prefetch: usize,
}

impl OffloadArgs {
    /// The placement beside a KV cache of this layout.
    pub fn placement(&self, gguf: &Gguf, cache: CacheLayout) -> Result<ultra::model::Placement> {
        let cfg = ultra::model::Config::from_gguf(gguf)?;
        let foot = ultra::model::Footprint::of(gguf, &cfg, cache);
        Ok(foot.place(self.gpu_layers, self.gpu_memory, self.prefetch)?)
    }
}

/// A `--gpu-memory` SIZE.
pub fn parse_size(text: &str) -> Result<u64, String> {
    ultra::model::placement::parse_size(text).map_err(|e| e.to_string())
}

#[derive(Args, Clone, Debug)]
pub struct CacheArgs {
    /// Paged KV cache: pages from a shared pool, allocated on demand, shared between prompts
    /// with equal prefixes.
    #[arg(long)]
    pub paged_cache: bool,
    /// Tokens per page.
    #[arg(long, default_value_t = 16)]
    pub page_size: usize,
    /// Pages in the pool (default: enough for every sequence's full context).
    #[arg(long)]
    pub cache_pages: Option<usize>,
    #[arg(long, value_enum, default_value_t = KvType::F32)]
    pub kv_type: KvType,
}

/// What the KV cache stores (llama.cpp's `-ctk`/`-ctv`, one switch for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KvType {
    /// f32 values: every backend; the default.
    F32,
    /// f16 values, half the bytes for attention to read (cuda and wgpu; the cpu refuses it).
    F16,
    /// q8_0 blocks (32 int8 values and an f16 scale), 0.53× f16's bytes (wgpu; cuda and the cpu
    /// refuse it).
    #[value(name = "q8_0")]
    Q8_0,
}

impl KvType {
    pub fn dtype(self) -> ultra::backend::DType {
        match self {
            KvType::F32 => ultra::backend::DType::F32,
            KvType::F16 => ultra::backend::DType::F16,
            KvType::Q8_0 => ultra::backend::DType::Q8_0,
        }
    }
}

impl CacheArgs {
    pub fn layout(&self, max_seqs: usize, context: usize) -> CacheLayout {
        if self.paged_cache {
            let page = self.page_size.max(1);
            CacheLayout::paged(page, self.cache_pages.unwrap_or(max_seqs * context.div_ceil(page)))
        } else {
            CacheLayout::plain(max_seqs, context)
        }
        .with_kv_dtype(self.kv_type.dtype())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DraftMode {
    None,
    /// A separate draft model (`--draft-model`) with the same vocabulary.
    Model,
    /// The target's own first `--draft-layers` layers and its head.
    #[value(name = "self")]
    SelfLayers,
    /// The most frequent continuation seen so far.
    Ngram,
    /// Prompt lookup: what followed the last tokens' earlier occurrence.
    Lookup,
}

#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    #[arg(long, value_enum, default_value_t = DraftMode::None)]
    pub draft_mode: DraftMode,
    /// Drafted tokens per verification pass.
    #[arg(long, default_value_t = 4)]
    pub speculate: usize,
    /// Grow and shrink the window from recent acceptance; turn speculation off when it does not pay.
    #[arg(long)]
    pub adaptive_k: bool,
    #[arg(long)]
    pub draft_model: Option<PathBuf>,
    /// Layers of the target used by `--draft-mode self` (default: a quarter).
    #[arg(long)]
    pub draft_layers: Option<usize>,
}

#[derive(Args, Clone, Debug)]
pub struct TokenizeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long)]
    pub text: String,
    /// Treat special-token text (`<|im_start|>`) as plain text.
    #[arg(long)]
    pub no_special: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text file to score.
    #[arg(long)]
    pub file: PathBuf,
    /// Tokens per chunk.
    #[arg(long, default_value_t = 512)]
    pub ctx: usize,
    /// Tokens per forward pass (default: ctx).
    #[arg(long)]
    pub batch: Option<usize>,
    #[arg(long, value_enum, default_value_t = BackendName::Cpu)]
    pub backend: BackendName,
    /// What the KV cache stores: its effect on perplexity is the cache type's quality (as
    /// llama-perplexity's `-ctk`/`-ctv`).
    #[arg(long, value_enum, default_value_t = KvType::F32)]
    pub kv_type: KvType,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub offload: OffloadArgs,
}

#[derive(Args, Clone, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Also describe this backend's device.
    #[arg(long, value_enum)]
    pub backend: Option<BackendName>,
}

#[derive(Args, Clone, Debug)]
pub struct SynthArgs {
    #[arg(long, default_value = "llama")]
    pub arch: String,
    /// smollm2-135m, llama-1b or llama-8b.
    #[arg(long)]
    pub preset: String,
    /// Weight format: q4_0, q4_1, q8_0, f16 (also q5_0, q5_1, bf16, f32, and one k-quant
    /// throughout: q3_k, q4_k, q5_k), or a k-quant mix as llama-quantize writes it: q4_k_m,
    /// q5_k_m, q6_k, q2_k, q3_k_m.
    #[arg(long = "type")]
    pub format: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long, value_enum, default_value_t = BackendName::Cpu)]
    pub backend: BackendName,
    /// Prompt tokens to prefill.
    #[arg(short = 'p', long = "prompt-tokens", default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Tokens to decode (per sequence with --batch, per prompt with --draft-mode).
    #[arg(short = 'n', long = "gen-tokens", default_value_t = 128)]
    pub gen_tokens: usize,
    /// Runs; the median is reported.
    #[arg(short = 'r', long = "runs", default_value_t = 5)]
    pub runs: usize,
    /// Aggregate decode tok/s of B sequences decoded together, for each B of a list
    /// (`1,2,4` or `1-8`; alone: 1,2,4,8,16,32).
    #[arg(long, num_args = 0..=1, default_missing_value = "1,2,4,8,16,32", value_parser = parse_list)]
    pub batch: Option<List>,
    /// Speculative decoding against plain greedy decoding on the reference prompts, for each
    /// drafter of a list (`lookup,ngram,self`).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub draft_mode: Vec<DraftMode>,
    /// Drafted tokens per verification pass, a list (`1-8`, `2,4`).
    #[arg(long, default_value = "4", value_parser = parse_list)]
    pub speculate: List,
    #[arg(long)]
    pub draft_model: Option<PathBuf>,
    /// Layers of the target used by `--draft-mode self` (default: a quarter).
    #[arg(long)]
    pub draft_layers: Option<usize>,
    /// Load-test a running `ultra serve` at this URL (http://HOST:PORT) instead of a model:
    /// streamed completions of -p prompt tokens and -n generated tokens per client.
    #[arg(long)]
    pub serve: Option<String>,
    /// With --serve: the concurrent clients of each round, a list.
    #[arg(long, default_value = "1,8,32,64", value_parser = parse_list)]
    pub clients: List,
    /// With --serve: the server's --api-key.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Layers kept on the GPU, a list (`0,8,16,24,32`): prefill and decode for each, streaming
    /// the others from host memory, with the bandwidth achieved and a plot (`--plot`).
    #[arg(long, value_parser = parse_counts)]
    pub gpu_layers: Option<List>,
    /// With --gpu-layers: ring depths to try, a list (`1,2,4`).
    #[arg(long, default_value = "2", value_parser = parse_list)]
    pub prefetch: List,
    /// What the KV cache stores, for the pp/tg and --batch runs.
    #[arg(long, value_enum, default_value_t = KvType::F32)]
    pub kv_type: KvType,
    /// With --gpu-layers: where to write the SVG plot of tok/s against resident layers; with
    /// --batch: of aggregate decode tok/s against the batch size.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// A list of counts that may include 0 (`0,8,16`, `0-4,8`).
pub fn parse_counts(text: &str) -> Result<List, String> {
    // `parse_list` refuses 0: shift every count up by one through it, then back.
    let shifted = text
        .split(',')
        .map(|part| {
            let one =
                |s: &str| s.trim().parse::<usize>().map(|n| (n + 1).to_string()).unwrap_or_else(|_| s.to_string());
            match part.split_once('-') {
                Some((a, b)) => format!("{}-{}", one(a), one(b)),
                None => one(part),
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let List(counts) = parse_list(&shifted).map_err(|_| format!("`{text}`: expected counts like `0,8,16` or `0-4`"))?;
    Ok(List(counts.into_iter().map(|n| n - 1).collect()))
}

/// A list of counts from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List(pub Vec<usize>);

/// `1,2,4`, `1-8` or a mix (`1-4,8`).
pub fn parse_list(text: &str) -> Result<List, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("`{s}` is not a count in `{text}`"));
        match part.split_once('-') {
            Some((a, b)) => out.extend(num(a)?..=num(b)?),
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() || out.contains(&0) {
        return Err(format!("`{text}`: expected counts above 0, like `1,2,4` or `1-8`"));
    }
    Ok(List(out))
}

/// The context to serve: `--ctx`, else the model's trained context capped at 4096.
pub fn context_size(requested: Option<usize>, trained: usize) -> usize {
    requested.unwrap_or(trained.min(4096)).max(1)
}
