//! k-quant mixes: the type `llama-quantize` gives each tensor of a llama-architecture model for
//! the file types Q2_K, Q3_K_M, Q4_K_M, Q5_K_M and Q6_K, so `ultra synth` writes files shaped like
//! the ones people download.
//!
//! The rule is llama.cpp's `llama_tensor_get_type` (`llama_tensor_get_type_impl` and
//! `tensor_type_fallback` in src/llama-quant.cpp, read for this in ggml-org/llama.cpp at commit
//! 007dbbf3), restricted to what applies here: a llama-architecture model without experts, not
//! Falcon, not a 70B, no importance matrix, no `--tensor-type` / `--output-tensor-type`
//! overrides, no `--pure`. `llama-quantize` walks the tensors in layer order, so its attn_v
//! counter is the layer index. With `i` the layer and `n` the layer count, and
//! `use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2` (integer division):
//!
//! | tensor | Q2_K | Q3_K_M | Q4_K_M | Q5_K_M | Q6_K |
//! | --- | --- | --- | --- | --- | --- |
//! | output (or token_embd when tied) | Q6_K | Q6_K | Q6_K | Q6_K | Q6_K |
//! | token_embd (untied) | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K |
//! | attn_v | Q4_K if n_head/n_head_kv >= 4, else Q3_K | Q5_K for i < 2, else Q4_K | Q6_K if use_more_bits, else Q4_K | Q6_K if use_more_bits, else Q5_K | Q6_K |
//! | ffn_down | Q3_K | Q5_K for i < n/16, else Q4_K | Q6_K if use_more_bits, else Q4_K | Q6_K if use_more_bits, else Q5_K | Q6_K |
//! | attn_output | Q3_K | Q4_K | Q4_K | Q5_K | Q6_K |
//! | attn_q, attn_k, ffn_gate, ffn_up | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K |
//!
//! Then llama.cpp's shape fallback (`tensor_type_fallback`): a tensor whose row length is not a
//! multiple of 256 cannot hold super-blocks and takes Q4_0 (for Q2_K, Q3_K), Q5_0 (Q4_K),
//! Q5_1 (Q5_K) or Q8_0 (Q6_K), and F16 if the row is not even a multiple of 32; the output tensor
//! in that case is Q8_0 directly. (SmolLM2-135M's 576-wide rows are such a case: its Q4_K_M
//! attention and FFN input projections are Q5_0, its attn_v Q8_0 or Q5_0.) Norms are not
//! quantized.

use crate::quant::Format;

/// A llama.cpp file type made of k-quants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mix {
    Q2K,
    Q3KM,
    Q4KM,
    Q5KM,
    Q6K,
}

/// What the rule needs to know about the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixModel {
    pub n_layers: usize,
    /// n_head / n_head_kv.
    pub n_gqa: usize,
    /// No `output.weight`: token_embd is the output projection too.
    pub tied_embeddings: bool,
}

impl Mix {
    pub const ALL: [Mix; 5] = [Mix::Q2K, Mix::Q3KM, Mix::Q4KM, Mix::Q5KM, Mix::Q6K];

    /// `llama-quantize`'s name, lower case: `q4_k_m`.
    pub const fn name(self) -> &'static str {
        match self {
            Mix::Q2K => "q2_k",
            Mix::Q3KM => "q3_k_m",
            Mix::Q4KM => "q4_k_m",
            Mix::Q5KM => "q5_k_m",
            Mix::Q6K => "q6_k",
        }
    }

    pub fn parse(name: &str) -> Option<Mix> {
        Mix::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// llama.cpp's `llama_ftype` id (`general.file_type`).
    pub const fn file_type(self) -> u32 {
        match self {
            Mix::Q2K => 10,
            Mix::Q3KM => 12,
            Mix::Q4KM => 15,
            Mix::Q5KM => 17,
            Mix::Q6K => 18,
        }
    }

    /// The type of every tensor the rule does not single out.
    pub const fn base(self) -> Format {
        match self {
            Mix::Q2K => Format::Q2_K,
            Mix::Q3KM => Format::Q3_K,
            Mix::Q4KM => Format::Q4_K,
            Mix::Q5KM => Format::Q5_K,
            Mix::Q6K => Format::Q6_K,
        }
    }

    /// The type of the matrix `name` (llama.cpp's tensor names) with rows of `cols` values.
    pub fn tensor_format(self, name: &str, cols: usize, model: &MixModel) -> Format {
        let layer = name.strip_prefix("blk.").and_then(|rest| rest.split('.').next()?.parse::<usize>().ok());
        let (i, n) = (layer.unwrap_or(0), model.n_layers);
        // Short-circuit keeps i - n/8 from underflowing, as in C.
        let more_bits = i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let is_output = name == "output.weight" || (model.tied_embeddings && name == "token_embd.weight");
        if is_output {
            return if cols.is_multiple_of(256) { Format::Q6_K } else { fallback(Format::Q8_0, cols) };
        }
        let base = self.base();
        let picked = if name.contains("attn_v.weight") {
            match self {
                Mix::Q2K if model.n_gqa >= 4 => Format::Q4_K,
                Mix::Q2K => Format::Q3_K,
                Mix::Q3KM if i < 2 => Format::Q5_K,
                Mix::Q3KM => Format::Q4_K,
                Mix::Q4KM | Mix::Q5KM if more_bits => Format::Q6_K,
                _ => base,
            }
        } else if name.contains("ffn_down") {
            match self {
                Mix::Q2K => Format::Q3_K,
                Mix::Q3KM if i < n / 16 => Format::Q5_K,
                Mix::Q3KM => Format::Q4_K,
                Mix::Q4KM | Mix::Q5KM if more_bits => Format::Q6_K,
                _ => base,
            }
        } else if name.contains("attn_output.weight") {
            match self {
                Mix::Q2K => Format::Q3_K,
                Mix::Q3KM => Format::Q4_K,
                _ => base,
            }
        } else {
            base
        };
        fallback(picked, cols)
    }
}

/// llama.cpp's `tensor_type_fallback` for rows that do not hold whole blocks of `format`.
pub fn fallback(format: Format, cols: usize) -> Format {
    if cols.is_multiple_of(format.block_len()) {
        return format;
    }
    let legacy = match format {
        Format::Q2_K | Format::Q3_K => Format::Q4_0,
        Format::Q4_K => Format::Q5_0,
        Format::Q5_K => Format::Q5_1,
        Format::Q6_K => Format::Q8_0,
        other => other,
    };
    if cols.is_multiple_of(legacy.block_len()) { legacy } else { Format::F16 }
}
