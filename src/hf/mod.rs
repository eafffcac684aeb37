//! Hugging Face checkpoint directories: `config.json`, `*.safetensors` (one file or shards named
//! by `model.safetensors.index.json`), `tokenizer.json` and its companions.
//!
//! The seam: a directory is translated, at load, into the model description the rest of the
//! engine already reads, a `Gguf` with llama.cpp's metadata keys and tensor names, as
//! convert_hf_to_gguf.py would write it, but in memory (`Gguf::from_parts`). Tensors that need no
//! conversion stay in their memory maps; the few that do (llama's permuted q/k, Gemma's shifted
//! norm gains, `--quantize`) are converted copies. So every command that takes `--model FILE`
//! takes a directory too, and Hugging Face names appear only in this module.

mod config;
mod safetensors;
mod tensors;
mod tokenizer;

use std::path::Path;

use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::gguf::Value;
use crate::quant::Format;
use crate::quant::intn;
use crate::quant::target::Target;

pub use safetensors::parse as parse_safetensors;

/// Whether `path` is a checkpoint directory (has a `config.json`).
pub fn is_checkpoint_dir(path: &Path) -> bool {
    path.is_dir() && path.join("config.json").is_file()
}

/// Opens a model: a GGUF file, or a checkpoint directory quantized on load to `quantize`
/// (which a GGUF file refuses: it is converted once, by `ultra quantize`).
pub fn open_model(path: &Path, quantize: Option<Target>) -> Result<Gguf> {
    if path.is_dir() {
        return open(path, quantize);
    }
    if let Some(q) = quantize {
        return Err(Error::InvalidArgument(format!(
            "--quantize {} applies to Hugging Face checkpoint directories; {} is a GGUF file",
            q.name().to_lowercase(),
            path.display()
        )));
    }
    Gguf::open(path)
}

/// Loads the checkpoint in `dir`, its matrices quantized to `quantize` where given (as `ultra
/// quantize` would: `quant::target`).
pub fn open(dir: &Path, quantize: Option<Target>) -> Result<Gguf> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(Error::file(&path))?;
    let cfg = config::parse(&text)?;
    let checkpoint = safetensors::open(dir)?;
    let mut metadata = cfg.metadata.clone();
    metadata.extend(tokenizer::metadata(dir, Some(vocab_size(&cfg)), &cfg.eos_ids, cfg.bos_id)?);
    let tensors = tensors::convert(&cfg, checkpoint.tensors, quantize)?;
    if tensors.iter().any(|(t, _)| matches!(t.format(), Ok(Format::Intn(_)))) {
        metadata.push((intn::VERSION_KEY.to_string(), Value::U32(intn::VERSION)));
    }
    Gguf::from_parts(metadata, tensors)
}

/// The tokenizer of a directory alone (tokenizer.json and its companions; no config.json or
/// weights needed), as the same `tokenizer.*` GGUF keys a checkpoint's loader makes.
pub fn open_tokenizer(dir: &Path) -> Result<Gguf> {
    Gguf::from_parts(tokenizer::metadata(dir, None, &[], None)?, Vec::new())
}

/// A single-file checkpoint held in memory (`config.json`'s text and a safetensors file's
/// bytes), without a tokenizer: for fuzzing and tests.
pub fn from_bytes(config_json: &str, safetensors: Vec<u8>) -> Result<Gguf> {
    let cfg = config::parse(config_json)?;
    let tensors = safetensors::parse(std::sync::Arc::new(safetensors), Path::new("model.safetensors"))?;
    Gguf::from_parts(cfg.metadata.clone(), tensors::convert(&cfg, tensors, None)?)
}

fn vocab_size(cfg: &config::HfConfig) -> usize {
    let key = cfg.metadata.iter().find(|(k, _)| k.ends_with(".vocab_size"));
    key.and_then(|(_, v)| v.as_u64()).unwrap_or(0) as usize
}
