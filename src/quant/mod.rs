//! Weight formats: ggml's block layouts, read bit-exactly as GGUF stores them.
//! Layouts: https://github.com/ggml-org/ggml/blob/master/src/ggml-common.h
//!
//! A row of `cols` values is `cols / block_len` blocks stored back to back. Each format has a
//! scalar dequantizer (the reference every kernel is tested against) and, where it can be
//! quantized, a quantizer reproducing the `gguf` Python package's reference bytes.
//! Ultra's own group-wise formats (INT8/4/2, NF4) are `Format::Intn`, ids outside ggml's (`intn`).

use crate::error::{Error, Result};

/// A tensor storage format, numbered by ggml's type ids.
#[allow(non_camel_case_types)] // ggml's names: Q4_K, as Q4_0
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    /// Group-wise INT8/INT4/INT2 and NF4 (`intn`), type ids from 1000.
    Intn(intn::Intn),
}

impl Format {
    /// ggml's formats this engine reads, then ours (`intn::ALL`).
    pub const ALL: [Format; 28] = {
        let mut all = [Format::F32; 28];
        let mut i = 0;
        while i < 13 {
            all[i] = Format::GGML[i];
            i += 1;
        }
        while i < 28 {
            all[i] = Format::Intn(intn::ALL[i - 13]);
            i += 1;
        }
        all
    };

    /// The ggml formats: what llama.cpp reads too.
    pub const GGML: [Format; 13] = [
        Format::F32,
        Format::F16,
        Format::BF16,
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q5_1,
        Format::Q8_0,
        Format::Q2_K,
        Format::Q3_K,
        Format::Q4_K,
        Format::Q5_K,
        Format::Q6_K,
    ];

    /// ggml's type id (`enum ggml_type`).
    pub const fn ggml_id(self) -> u32 {
        match self {
            Format::F32 => 0,
            Format::F16 => 1,
            Format::Q4_0 => 2,
            Format::Q4_1 => 3,
            Format::Q5_0 => 6,
            Format::Q5_1 => 7,
            Format::Q8_0 => 8,
            Format::Q2_K => 10,
            Format::Q3_K => 11,
            Format::Q4_K => 12,
            Format::Q5_K => 13,
            Format::Q6_K => 14,
            Format::BF16 => 30,
            Format::Intn(f) => f.type_id(),
        }
    }

    /// The format for a ggml type id, or an error naming the type when this engine cannot read it.
    pub fn from_ggml_id(id: u32, tensor: &str) -> Result<Format> {
        Format::ALL.into_iter().find(|f| f.ggml_id() == id).ok_or_else(|| Error::UnsupportedTensorType {
            tensor: tensor.to_string(),
            type_name: ggml_type_name(id),
            type_id: id,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            Format::Intn(f) => f.name(),
            _ => ggml_type_name(self.ggml_id()),
        }
    }

    /// Values per block (one for float formats: a "block" is one value; 256 for the k-quants'
    /// super-blocks).
    pub const fn block_len(self) -> usize {
        match self {
            Format::F32 | Format::F16 | Format::BF16 => 1,
            Format::Q4_0 | Format::Q4_1 | Format::Q5_0 | Format::Q5_1 | Format::Q8_0 => 32,
            Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K => kquant::QK_K,
            Format::Intn(f) => f.block_len(),
        }
    }

    /// Q2_K … Q6_K: 256-value super-blocks with sub-block scales (`kquant`).
    pub const fn is_kquant(self) -> bool {
        matches!(self, Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K)
    }

    /// The fields of one block as GGUF stores them, in the order GPU backends keep them as
    /// separate arrays (each field of every block back to back): quants first, then the fifth
    /// bits, then the scales (`d`, or `d` and `m`). Float formats are one field, the value.
    /// k-quants add their packed sub-block `scales` before the super-block `d`/`dm` (no GPU
    /// backend reads them yet).
    pub const fn fields(self) -> &'static [BlockField] {
        match self {
            Format::F32 => &[BlockField { name: "value", start: 0, end: 4 }],
            Format::F16 | Format::BF16 => &[BlockField { name: "value", start: 0, end: 2 }],
            Format::Q4_0 => &[BlockField { name: "qs", start: 2, end: 18 }, BlockField { name: "d", start: 0, end: 2 }],
            Format::Q4_1 => {
                &[BlockField { name: "qs", start: 4, end: 20 }, BlockField { name: "dm", start: 0, end: 4 }]
            }
            Format::Q5_0 => &[
                BlockField { name: "qs", start: 6, end: 22 },
                BlockField { name: "qh", start: 2, end: 6 },
                BlockField { name: "d", start: 0, end: 2 },
            ],
            Format::Q5_1 => &[
                BlockField { name: "qs", start: 8, end: 24 },
                BlockField { name: "qh", start: 4, end: 8 },
                BlockField { name: "dm", start: 0, end: 4 },
            ],
            Format::Q8_0 => &[BlockField { name: "qs", start: 2, end: 34 }, BlockField { name: "d", start: 0, end: 2 }],
            Format::Q2_K => &[
                BlockField { name: "qs", start: 16, end: 80 },
                BlockField { name: "scales", start: 0, end: 16 },
                BlockField { name: "dm", start: 80, end: 84 },
            ],
            Format::Q3_K => &[
                BlockField { name: "qs", start: 32, end: 96 },
                BlockField { name: "hmask", start: 0, end: 32 },
                BlockField { name: "scales", start: 96, end: 108 },
                BlockField { name: "d", start: 108, end: 110 },
            ],
            Format::Q4_K => &[
                BlockField { name: "qs", start: 16, end: 144 },
                BlockField { name: "scales", start: 4, end: 16 },
                BlockField { name: "dm", start: 0, end: 4 },
            ],
            Format::Q5_K => &[
                BlockField { name: "qs", start: 48, end: 176 },
                BlockField { name: "qh", start: 16, end: 48 },
                BlockField { name: "scales", start: 4, end: 16 },
                BlockField { name: "dm", start: 0, end: 4 },
            ],
            Format::Q6_K => &[
                BlockField { name: "ql", start: 0, end: 128 },
                BlockField { name: "qh", start: 128, end: 192 },
                BlockField { name: "scales", start: 192, end: 208 },
                BlockField { name: "d", start: 208, end: 210 },
            ],
            Format::Intn(f) => &INTN_FIELDS[f.scheme as usize * 3 + f.group as usize],
        }
    }

    /// The field named `name`, if the format has one.
    pub fn field(self, name: &str) -> Option<BlockField> {
        self.fields().iter().copied().find(|f| f.name == name)
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::F32 => 4,
            Format::F16 | Format::BF16 => 2,
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q5_1 => 24,
            Format::Q8_0 => 34,
            Format::Q2_K => kquant::Q2_K_BLOCK_BYTES,
            Format::Q3_K => kquant::Q3_K_BLOCK_BYTES,
            Format::Q4_K => kquant::Q4_K_BLOCK_BYTES,
            Format::Q5_K => kquant::Q5_K_BLOCK_BYTES,
            Format::Q6_K => kquant::Q6_K_BLOCK_BYTES,
            Format::Intn(f) => f.block_bytes(),
        }
    }

    pub const fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Bytes of one row of `cols` values; an error when `cols` is not a whole number of blocks.
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        if !cols.is_multiple_of(self.block_len()) {
            return Err(Error::InvalidArgument(format!(
                "{} rows hold whole blocks of {} values; {cols} is not a multiple",
                self.name(),
                self.block_len()
            )));
        }
        (cols / self.block_len())
            .checked_mul(self.block_bytes())
            .ok_or_else(|| Error::InvalidArgument(format!("row of {cols} values overflows")))
    }

    /// Parses a user-facing name such as `q4_0` or `F16`.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }
}

/// `Format::fields` of the group-wise formats, in `intn::ALL` order.
static INTN_FIELDS: [[BlockField; 2]; 15] = {
    let mut all = [[BlockField { name: "", start: 0, end: 0 }; 2]; 15];
    let mut i = 0;
    while i < 15 {
        let [(n0, s0, e0), (n1, s1, e1)] = intn::ALL[i].fields();
        all[i] = [BlockField { name: n0, start: s0, end: e0 }, BlockField { name: n1, start: s1, end: e1 }];
        i += 1;
    }
    all
};

/// One field of a block: bytes `start..end` of every block (see `Format::fields`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockField {
    pub name: &'static str,
    pub start: usize,
    pub end: usize,
}

impl BlockField {
    pub const fn len(self) -> usize {
        self.end - self.start
    }
    pub const fn is_empty(self) -> bool {
        self.start == self.end
    }
}

/// ggml's name for every type id it defines, known or not to this engine (for error messages).
pub const fn ggml_type_name(id: u32) -> &'static str {
    match id {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => "unknown",
    }
}

mod dequant;
pub mod intn;
pub mod kquant;
mod quantize;
pub mod target;
pub use dequant::dequantize_row;
pub use quantize::{f32_to_bf16_bits, quantize_row, quantize_row_into};
