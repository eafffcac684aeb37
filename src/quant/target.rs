//! What a quantized file is made of: the one place a format name (`ultra quantize --to`, and
//! `--quantize` on load) becomes a per-tensor format and a quantizer.
//!
//! Names: `int8`, `int4`, `int2`, `nf4`, `nf4_dq` with a group size (default 32 for int8, 128
//! otherwise; or spelled out, `int4_g64`); ggml's `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q8_0`,
//! `q3_k`, `q4_k`, `q5_k` (one format throughout), the llama-quantize mixes `q2_k`, `q3_k_m`,
//! `q4_k_m`, `q5_k_m`, `q6_k` (`kquant::mix`), and `f32`, `f16`, `bf16`.
//!
//! Per tensor ([`Target::tensor_format`]):
//! - vectors (norms, biases) keep their bytes;
//! - a kept role (default `token_embd` and `output`) keeps its bytes when the source is
//!   quantized, and when it is a float takes the less lossy of the target and 8 bits
//!   (INT8_G32 for our formats, Q8_0 for ggml's), so it is never worse than int8;
//! - every other matrix takes the target; a row that does not hold whole blocks of it takes,
//!   for our formats, the same scheme at the largest smaller group that fits (SmolLM2's 576-wide
//!   rows: INT4_G128 -> INT4_G64), and for ggml's llama.cpp's `tensor_type_fallback`; rows that
//!   fit no block of 32 are F16.

use rayon::prelude::*;

use super::intn::{Group, Intn, Scheme};
use super::kquant::mix::{Mix, MixModel, fallback};
use super::{Format, dequantize_row, quantize_row_into};
use crate::error::{Error, Result};

/// A quantization target: one format for every matrix, or a k-quant mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Pure(Format),
    Mix(Mix),
}

/// The roles `--keep` may name, matched against llama.cpp's tensor names.
pub const ROLES: [&str; 9] =
    ["token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"];

/// The roles kept by default.
pub const DEFAULT_KEEP: [&str; 2] = ["token_embd", "output"];

impl Target {
    /// A target from its name and an optional group size (our formats only).
    pub fn parse(name: &str, group: Option<usize>) -> Result<Target> {
        let lower = name.to_ascii_lowercase();
        let scheme = match lower.as_str() {
            "int8" => Some(Scheme::Int8),
            "int4" => Some(Scheme::Int4),
            "int2" => Some(Scheme::Int2),
            "nf4" => Some(Scheme::Nf4),
            "nf4_dq" | "nf4dq" => Some(Scheme::Nf4Dq),
            _ => None,
        };
        if let Some(scheme) = scheme {
            let group = match group {
                None => scheme.default_group(),
                Some(g) => Group::from_size(g).ok_or_else(|| {
                    Error::InvalidArgument(format!("--group-size {g}: the group sizes are 32, 64 and 128"))
                })?,
            };
            return Ok(Target::Pure(Format::Intn(Intn::new(scheme, group))));
        }
        if let Some(g) = group
            && !matches!(Format::parse(name), Some(Format::Intn(f)) if f.group.size() == g)
        {
            return Err(Error::InvalidArgument(format!(
                "--group-size {g} applies to int8/int4/int2/nf4/nf4_dq, not `{name}`"
            )));
        }
        Mix::parse(name).map(Target::Mix).or_else(|| Format::parse(name).map(Target::Pure)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown format `{name}` (int8, int4, int2, nf4, nf4_dq, q4_0, q4_1, q5_0, q5_1, q8_0, \
                 q2_k, q3_k, q3_k_m, q4_k, q4_k_m, q5_k, q5_k_m, q6_k, f16, bf16, f32)"
            ))
        })
    }

    pub fn name(self) -> String {
        match self {
            Target::Pure(f) => f.name().to_string(),
            Target::Mix(m) => m.name().to_uppercase(),
        }
    }

    /// Whether any tensor may take one of our formats (the file then carries `ultra.quant.version`).
    pub const fn is_ours(self) -> bool {
        matches!(self, Target::Pure(Format::Intn(_)))
    }

    /// llama.cpp's `general.file_type` for the ggml targets (None for ours).
    pub fn file_type(self) -> Option<u32> {
        Some(match self {
            Target::Mix(m) => m.file_type(),
            Target::Pure(f) => match f {
                Format::F32 => 0,
                Format::F16 => 1,
                Format::Q4_0 => 2,
                Format::Q4_1 => 3,
                Format::Q8_0 => 7,
                Format::Q5_0 => 8,
                Format::Q5_1 => 9,
                Format::Q2_K => 10,
                Format::Q3_K => 11,
                Format::Q4_K => 14,
                Format::Q5_K => 16,
                Format::Q6_K => 18,
                Format::BF16 => 32,
                Format::Intn(_) => return None,
            },
        })
    }

    /// The format of tensor `name` of `rows` × `cols` values stored as `source`; `keep` lists
    /// the roles that keep the source's type (module doc).
    pub fn tensor_format(
        self,
        name: &str,
        rows: usize,
        cols: usize,
        source: Format,
        model: &MixModel,
        keep: &[String],
    ) -> Format {
        if rows <= 1 || !name.ends_with(".weight") {
            return source;
        }
        let kept = roles(name, model).iter().any(|r| keep.iter().any(|k| k == r));
        if kept {
            if source.is_quantized() {
                return source;
            }
            let eight = if self.is_ours() { Format::Intn(Intn::new(Scheme::Int8, Group::G32)) } else { Format::Q8_0 };
            let target = match self {
                Target::Pure(f) => f,
                Target::Mix(_) => eight,
            };
            return fit(if bits_per_weight(target) >= bits_per_weight(eight) { target } else { eight }, cols);
        }
        match self {
            Target::Mix(m) => m.tensor_format(name, cols, model),
            Target::Pure(f) => fit(f, cols),
        }
    }
}

/// The roles tensor `name` plays: token_embd is also `output` when the model ties them.
fn roles(name: &str, model: &MixModel) -> Vec<&'static str> {
    let base = name.strip_suffix(".weight").unwrap_or(name);
    let last = base.rsplit('.').next().unwrap_or(base);
    let mut out: Vec<&'static str> = ROLES.iter().copied().filter(|&r| r == last).collect();
    if model.tied_embeddings && last == "token_embd" {
        out.push("output");
    }
    out
}

/// `format`, or what a row of `cols` values can hold instead (module doc).
fn fit(format: Format, cols: usize) -> Format {
    if let Format::Intn(f) = format {
        let smaller = Group::ALL.into_iter().rev().filter(|g| g.size() <= f.group.size());
        return smaller
            .map(|g| Format::Intn(Intn::new(f.scheme, g)))
            .find(|t| cols.is_multiple_of(t.block_len()))
            .unwrap_or(if cols.is_multiple_of(32) { Format::Q8_0 } else { Format::F16 });
    }
    fallback(format, cols)
}

/// Storage bits per value of `format`.
pub fn bits_per_weight(format: Format) -> f64 {
    8.0 * format.block_bytes() as f64 / format.block_len() as f64
}

/// The `rows` × `cols` values of `bytes` (stored as `from`) in format `to`: the bytes
/// themselves when the formats agree, else dequantized to f32 and quantized again, rows in parallel.
pub fn convert(from: Format, bytes: &[u8], rows: usize, cols: usize, to: Format) -> Result<Vec<u8>> {
    let (src_row, dst_row) = (from.row_bytes(cols)?, to.row_bytes(cols)?);
    if bytes.len() != rows * src_row {
        return Err(Error::InvalidArgument(format!(
            "{rows} rows of {cols} {} values are not {} bytes",
            from.name(),
            bytes.len()
        )));
    }
    if from == to {
        return Ok(bytes.to_vec());
    }
    let mut out = vec![0u8; rows * dst_row];
    if cols > 0 {
        out.par_chunks_mut(dst_row).zip(bytes.par_chunks(src_row)).for_each_init(
            || vec![0f32; cols],
            |values, (dst, src)| {
                dequantize_row(from, src, values);
                quantize_row_into(to, values, dst);
            },
        );
    }
    Ok(out)
}
