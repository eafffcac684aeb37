//! Ultra's group-wise formats: asymmetric INT8 / INT4 / INT2 and QLoRA's NF4 (plain, or with
//! double-quantized scales), each with a group of G = 32, 64 or 128 values along k.
//!
//! Layout (little-endian; every block self-contained and a multiple of 4 bytes long, so a GPU
//! kernel reads whole u32 words and a row is `k / block_len` blocks back to back):
//!
//! | scheme  | block_len | bytes      | header (bytes 0..4)                  | data (bytes 4..)        |
//! |---------|-----------|------------|--------------------------------------|-------------------------|
//! | INT8    | G         | 4 + G      | d: f16, z: u8, pad: u8 (0)           | G values, 8 bits each   |
//! | INT4    | G         | 4 + G/2    | d: f16, z: u8, pad: u8 (0)           | G values, 4 bits each   |
//! | INT2    | G         | 4 + G/4    | d: f16, z: u8, pad: u8 (0)           | G values, 2 bits each   |
//! | NF4     | G         | 4 + G/2    | absmax: f16, pad: u16 (0)            | G codes, 4 bits each    |
//! | NF4_DQ  | 2·G       | 4 + G      | D: f16, c0: u8, c1: u8               | 2·G codes, 4 bits each  |
//!
//! Packing: value i of a block sits at bit `b·i` of the data read as a little-endian bit string
//! (value i in byte `b·i / 8` at shift `b·i % 8`; in u32 word `i / (32/b)` of the data at shift
//! `b·(i % (32/b))`): INT4/NF4 put the even value in the low nibble. NF4_DQ's data is group 0's
//! G codes, then group 1's.
//!
//! Values: INT-b `x = d·(q - z)` (q, z in 0..2^b, so q - z is exact and there is one rounding);
//! NF4 `x = absmax·NF4[q]`; NF4_DQ `x = (D·c_g)·NF4[q]` for group g = i / G of the block (D·c_g
//! is exact in f32: 11 significant bits times 8). Rounding rules are in `quantize.rs`.
//!
//! Type ids: outside ggml's range (ggml defines ids below 64), `1000 + 10·scheme + group`, with
//! scheme INT8 = 0, INT4 = 1, INT2 = 2, NF4 = 3, NF4_DQ = 4 and group G32 = 0, G64 = 1, G128 = 2
//! (INT4_G128 is 1012). A GGUF file holding one carries `ultra.quant.version` = [`VERSION`];
//! llama.cpp's reader refuses a type id past its GGML_TYPE_COUNT when it reads the tensor infos.

mod dequant;
mod quantize;
mod round;
mod weighted;

pub use dequant::dequantize_block_row;
pub use quantize::{code_under_header, pack_block, quantize_block_row, quantize_block_row_weighted};

/// Version of this layout, written to GGUF metadata as `ultra.quant.version`; bump on any change.
pub const VERSION: u32 = 1;

/// The metadata key that carries [`VERSION`].
pub const VERSION_KEY: &str = "ultra.quant.version";

/// The first type id of ours; ids `ID_BASE..ID_BASE + 50` are reserved for group-wise formats.
pub const ID_BASE: u32 = 1000;

/// QLoRA's NormalFloat4 levels (Dettmers et al. 2023, "QLoRA", appendix E), as bitsandbytes
/// stores them (`csrc/kernels.cu`, `dDequantizeNF4`): quantiles of N(0, 1) scaled to [-1, 1].
/// The digits are bitsandbytes' (its f32 values printed in full); each rounds to that f32.
#[allow(clippy::excessive_precision)]
pub const NF4: [f32; 16] = [
    -1.0,
    -0.696_192_800_998_687_7,
    -0.525_073_051_452_636_7,
    -0.394_917_488_098_144_53,
    -0.284_441_381_692_886_35,
    -0.184_773_430_228_233_34,
    -0.091_050_036_251_544_95,
    0.0,
    0.079_580_299_556_255_34,
    0.160_930_201_411_247_25,
    0.246_112_301_945_686_34,
    0.337_915_241_718_292_24,
    0.440_709_829_330_444_34,
    0.562_617_003_917_694_1,
    0.722_956_836_223_602_3,
    1.0,
];

/// How the values of a group are coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    Int8,
    Int4,
    Int2,
    Nf4,
    /// NF4 with 8-bit group scales under one f16 per pair of groups (QLoRA's double quantization).
    Nf4Dq,
}

/// Values per group (along k).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    G32,
    G64,
    G128,
}

impl Group {
    pub const ALL: [Group; 3] = [Group::G32, Group::G64, Group::G128];

    /// Values in the group.
    pub const fn size(self) -> usize {
        match self {
            Group::G32 => 32,
            Group::G64 => 64,
            Group::G128 => 128,
        }
    }

    pub fn from_size(size: usize) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.size() == size)
    }

    const fn index(self) -> u32 {
        self as u32
    }
}

impl Scheme {
    pub const ALL: [Scheme; 5] = [Scheme::Int8, Scheme::Int4, Scheme::Int2, Scheme::Nf4, Scheme::Nf4Dq];

    /// Bits per value.
    pub const fn bits(self) -> usize {
        match self {
            Scheme::Int8 => 8,
            Scheme::Int2 => 2,
            Scheme::Int4 | Scheme::Nf4 | Scheme::Nf4Dq => 4,
        }
    }

    /// Groups per block: two for NF4_DQ (they share the f16 `D`), else one.
    pub const fn groups_per_block(self) -> usize {
        if matches!(self, Scheme::Nf4Dq) { 2 } else { 1 }
    }

    /// The default group when none is asked for (issue 12): 32 for INT8, 128 otherwise.
    pub const fn default_group(self) -> Group {
        if matches!(self, Scheme::Int8) { Group::G32 } else { Group::G128 }
    }

    const fn index(self) -> u32 {
        self as u32
    }
}

/// One group-wise format: a scheme and a group size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Intn {
    pub scheme: Scheme,
    pub group: Group,
}

/// Every format, in type id order.
pub const ALL: [Intn; 15] = {
    let mut all = [Intn { scheme: Scheme::Int8, group: Group::G32 }; 15];
    let mut i = 0;
    while i < 15 {
        all[i] = Intn { scheme: Scheme::ALL[i / 3], group: Group::ALL[i % 3] };
        i += 1;
    }
    all
};

/// Names, in the order of [`ALL`].
const NAMES: [&str; 15] = [
    "INT8_G32",
    "INT8_G64",
    "INT8_G128",
    "INT4_G32",
    "INT4_G64",
    "INT4_G128",
    "INT2_G32",
    "INT2_G64",
    "INT2_G128",
    "NF4_G32",
    "NF4_G64",
    "NF4_G128",
    "NF4_DQ_G32",
    "NF4_DQ_G64",
    "NF4_DQ_G128",
];

/// Bytes of a block's header (scales, zero point, padding) before its packed values.
pub const HEADER_BYTES: usize = 4;

impl Intn {
    pub const fn new(scheme: Scheme, group: Group) -> Intn {
        Intn { scheme, group }
    }

    const fn index(self) -> usize {
        (self.scheme.index() * 3 + self.group.index()) as usize
    }

    pub const fn type_id(self) -> u32 {
        ID_BASE + 10 * self.scheme.index() + self.group.index()
    }

    pub fn from_type_id(id: u32) -> Option<Intn> {
        ALL.into_iter().find(|f| f.type_id() == id)
    }

    pub const fn name(self) -> &'static str {
        NAMES[self.index()]
    }

    pub const fn block_len(self) -> usize {
        self.group.size() * self.scheme.groups_per_block()
    }

    pub const fn block_bytes(self) -> usize {
        HEADER_BYTES + self.block_len() * self.scheme.bits() / 8
    }

    /// GPU field split (see `Format::fields`): the packed values, then the 4-byte header.
    pub const fn fields(self) -> [(&'static str, usize, usize); 2] {
        let header = match self.scheme {
            Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => "dz",
            Scheme::Nf4 => "d",
            Scheme::Nf4Dq => "dc",
        };
        [("qs", HEADER_BYTES, self.block_bytes()), (header, 0, HEADER_BYTES)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_names_and_sizes_are_consistent() {
        for (i, f) in ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i);
            assert_eq!(Intn::from_type_id(f.type_id()), Some(f));
            assert!(f.block_bytes().is_multiple_of(4), "{}", f.name());
        }
        assert_eq!(Intn::new(Scheme::Int4, Group::G128).type_id(), 1012);
        assert_eq!(Intn::new(Scheme::Int4, Group::G128).block_bytes(), 68);
        assert_eq!(Intn::new(Scheme::Nf4Dq, Group::G64).block_bytes(), 68);
        assert_eq!(Intn::new(Scheme::Int2, Group::G32).block_bytes(), 12);
    }
}
