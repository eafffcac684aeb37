//! Hugging Face tensor names → GGUF names, and the conversions llama.cpp's convert_hf_to_gguf.py
//! makes on the way (facts from it; the code is ours):
//! - llama's q/k rows go from rotate-half order (HF pairs dimension i with i + head_dim/2) to
//!   adjacent pairs (2i, 2i + 1), which our `RopeStyle::Normal` rotates (`LlamaModel.permute`).
//!   qwen2, qwen3 and gemma3 rotate halves in both (`RopeStyle::Neox`): no permutation;
//! - Gemma's RMSNorm gains are stored as w and applied as 1 + w; GGUF stores 1 + w
//!   (`Gemma3Model.norm_shift`), so 1 is added here, in f32;
//! - Llama 3 rope scaling becomes the `rope_freqs` tensor of per-pair wavelength divisors;
//! - a tied output (`tie_word_embeddings`) has no `output.weight`: the model reads `token_embd`.
//!
//! Tensors that need none of this keep their bytes in the memory map.

use std::collections::HashMap;

use safetensors::Dtype;

use super::config::{HfConfig, Llama3Rope};
use super::safetensors::Entry;
use crate::backend::HostBytes;
use crate::error::{Error, Result};
use crate::gguf::TensorInfo;
use crate::model::Arch;
use crate::quant::kquant::mix::MixModel;
use crate::quant::target::{self, Target};
use crate::quant::{Format, dequantize_row};

/// The GGUF name of an HF tensor, `None` for tensors the text model does not use.
fn gguf_name(arch: Arch, hf: &str) -> Result<Option<String>> {
    const SKIP: &[&str] =
        &["vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."];
    if SKIP.iter().any(|p| hf.starts_with(p)) || hf.ends_with("rotary_emb.inv_freq") {
        return Ok(None);
    }
    let name = ["model.language_model.", "language_model.model.", "model."].iter().find_map(|p| hf.strip_prefix(p));
    let unknown = || Error::Metadata(format!("tensor `{hf}` is not part of a {} model this engine knows", arch.name()));
    let Some(name) = name else {
        return match hf {
            "lm_head.weight" | "language_model.lm_head.weight" => Ok(Some("output.weight".into())),
            _ => Err(unknown()),
        };
    };
    let global = match name {
        "embed_tokens.weight" => Some("token_embd.weight"),
        "norm.weight" => Some("output_norm.weight"),
        _ => None,
    };
    if let Some(g) = global {
        return Ok(Some(g.into()));
    }
    let rest = name.strip_prefix("layers.").ok_or_else(unknown)?;
    let (layer, rest) = rest.split_once('.').ok_or_else(unknown)?;
    let layer: usize = layer.parse().map_err(|_| unknown())?;
    let (module, suffix) = rest.rsplit_once('.').ok_or_else(unknown)?;
    let ours = match (module, arch) {
        ("self_attn.q_proj", _) => "attn_q",
        ("self_attn.k_proj", _) => "attn_k",
        ("self_attn.v_proj", _) => "attn_v",
        ("self_attn.o_proj", _) => "attn_output",
        ("self_attn.q_norm", _) => "attn_q_norm",
        ("self_attn.k_norm", _) => "attn_k_norm",
        ("input_layernorm", _) => "attn_norm",
        // Gemma normalizes both sides of each sublayer; the others only before the MLP.
        ("post_attention_layernorm", Arch::Gemma3) => "post_attention_norm",
        ("post_attention_layernorm", _) => "ffn_norm",
        ("pre_feedforward_layernorm", Arch::Gemma3) => "ffn_norm",
        ("post_feedforward_layernorm", Arch::Gemma3) => "post_ffw_norm",
        ("mlp.gate_proj", _) => "ffn_gate",
        ("mlp.up_proj", _) => "ffn_up",
        ("mlp.down_proj", _) => "ffn_down",
        _ => return Err(unknown()),
    };
    if suffix != "weight" && suffix != "bias" {
        return Err(unknown());
    }
    Ok(Some(format!("blk.{layer}.{ours}.{suffix}")))
}

fn source_format(name: &str, dtype: Dtype) -> Result<Format> {
    match dtype {
        Dtype::F32 => Ok(Format::F32),
        Dtype::F16 => Ok(Format::F16),
        Dtype::BF16 => Ok(Format::BF16),
        other => Err(Error::Metadata(format!("tensor `{name}` has dtype {other:?}; F32, F16 and BF16 are read"))),
    }
}

fn info(name: String, format: Format, shape: &[usize], n_bytes: usize) -> TensorInfo {
    // ggml order: the contiguous dimension first.
    let dims = shape.iter().rev().map(|&d| d as u64).collect();
    TensorInfo { name, dims, type_id: format.ggml_id(), offset: 0, n_bytes: n_bytes as u64 }
}

fn to_f32(format: Format, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dequantize_row(format, bytes, &mut out);
    out
}

fn f32_bytes(values: &[f32]) -> HostBytes {
    HostBytes::from_vec(values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

/// llama.cpp's HF → GGUF row order for llama's q and k: in each head, rows i and i + hd/2 become
/// rows 2i and 2i + 1. Rows move whole, so this works on any dtype's bytes.
fn permute_rows(bytes: &[u8], rows: usize, n_head: usize, name: &str) -> Result<Vec<u8>> {
    if n_head == 0 || !rows.is_multiple_of(2 * n_head) {
        return Err(Error::Metadata(format!("tensor `{name}`: {rows} rows are not {n_head} heads of an even size")));
    }
    let row_len = bytes.len() / rows;
    let (hd, half) = (rows / n_head, rows / n_head / 2);
    let mut out = vec![0u8; bytes.len()];
    for h in 0..n_head {
        for i in 0..half {
            for j in 0..2 {
                let (dst, src) = (h * hd + 2 * i + j, h * hd + j * half + i);
                out[dst * row_len..(dst + 1) * row_len].copy_from_slice(&bytes[src * row_len..(src + 1) * row_len]);
            }
        }
    }
    Ok(out)
}

/// convert_hf_to_gguf.py's Llama 3 `rope_freqs`: each pair's wavelength divisor.
fn llama3_rope_freqs(r: &Llama3Rope, head_dim: usize) -> Vec<f32> {
    let (low_wavelen, high_wavelen) = (r.original_max / r.low_freq_factor, r.original_max / r.high_freq_factor);
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / r.theta.powf(2.0 * i as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                r.factor as f32
            } else {
                let smooth = (r.original_max / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
                (1.0 / ((1.0 - smooth) / r.factor + smooth)) as f32
            }
        })
        .collect()
}

/// Every tensor the model reads, GGUF-named, converted, and quantized to `quantize` where asked,
/// by the rule `ultra quantize` follows (`quant::target`: matrices take the target, the
/// embeddings and output keep at least 8 bits, vectors keep their type).
pub fn convert(
    cfg: &HfConfig,
    tensors: HashMap<String, Entry>,
    quantize: Option<Target>,
) -> Result<Vec<(TensorInfo, HostBytes)>> {
    let model = MixModel {
        n_layers: cfg.n_layers,
        n_gqa: (cfg.n_heads / cfg.n_kv_heads.max(1)).max(1),
        tied_embeddings: cfg.tied,
    };
    let keep: Vec<String> = target::DEFAULT_KEEP.iter().map(|r| r.to_string()).collect();
    let mut out = Vec::with_capacity(tensors.len() + 1);
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    for hf in names {
        let entry = &tensors[hf];
        let Some(name) = gguf_name(cfg.arch, hf)? else { continue };
        if name == "output.weight" && cfg.tied {
            continue; // transformers saves a tied head only by mistake; the engine reads token_embd
        }
        if entry.shape.is_empty() || entry.shape.len() > 2 {
            return Err(Error::Metadata(format!("tensor `{hf}` has shape {:?}; 1-D or 2-D expected", entry.shape)));
        }
        let format = source_format(hf, entry.dtype)?;
        let n: usize = entry.shape.iter().product();
        let rows = if entry.shape.len() == 2 { entry.shape[0] } else { 1 };
        let is_norm = name.ends_with("norm.weight");
        if cfg.arch == Arch::Gemma3 && is_norm {
            let shifted: Vec<f32> = to_f32(format, entry.bytes.bytes(), n).iter().map(|w| w + 1.0).collect();
            out.push((info(name, Format::F32, &entry.shape, 4 * n), f32_bytes(&shifted)));
            continue;
        }
        let mut bytes = entry.bytes.clone();
        if cfg.arch == Arch::Llama && (name.contains(".attn_q.") || name.contains(".attn_k.")) {
            let heads = if name.contains(".attn_q.") { cfg.n_heads } else { cfg.n_kv_heads };
            let row_count = if entry.shape.len() == 2 { rows } else { n };
            bytes = HostBytes::from_vec(permute_rows(bytes.bytes(), row_count, heads, hf)?);
        }
        let to = match (quantize, entry.shape.as_slice()) {
            (Some(t), &[rows, cols]) => t.tensor_format(&name, rows, cols, format, &model, &keep),
            _ => format,
        };
        if to != format {
            let (rows, cols) = (entry.shape[0], entry.shape[1]);
            let packed = target::convert(format, bytes.bytes(), rows, cols, to)?;
            out.push((info(name, to, &entry.shape, packed.len()), HostBytes::from_vec(packed)));
        } else {
            out.push((info(name, format, &entry.shape, bytes.bytes().len()), bytes));
        }
    }
    // Without its head an untied model would silently run tied (the loader's fallback).
    if !cfg.tied && !out.iter().any(|(t, _)| t.name == "output.weight") {
        return Err(Error::Metadata("tie_word_embeddings is false, but there is no `lm_head.weight`".into()));
    }
    if let Some(r) = &cfg.llama3_rope {
        out.push((
            info("rope_freqs.weight".into(), Format::F32, &[cfg.head_dim / 2], 4 * (cfg.head_dim / 2)),
            f32_bytes(&llama3_rope_freqs(r, cfg.head_dim)),
        ));
    }
    Ok(out)
}
