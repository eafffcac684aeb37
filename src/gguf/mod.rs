//! GGUF files: a bounded, memory-mapped reader and a writer (used by `ultra synth` and tests).
//! Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//!
//! We read GGUF ourselves rather than through gguf-rs: that crate parses through `std::io::Read`
//! into owned values (no zero-copy tensor access from the map), pulls its CLI's dependencies into
//! the library, and does not bound counts against the file size, which a hostile file exploits.

#[cfg(not(target_arch = "wasm32"))]
mod file_bytes;
mod reader;
mod value;
mod writer;

#[cfg(not(target_arch = "wasm32"))]
pub use file_bytes::{Load, file_bytes};
pub use reader::{Gguf, TensorInfo};
pub use value::{Value, ValueType};
pub use writer::{GgufWriter, TensorStream};

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's GGML_MAX_DIMS.
pub const MAX_DIMS: usize = 4;
/// Arrays of arrays deeper than this are refused (no real file nests at all).
pub const MAX_ARRAY_DEPTH: usize = 4;

/// Values per block and bytes per block of every ggml type id (including types this engine
/// cannot compute with, so their tensors can still be bounds-checked and listed).
pub fn ggml_type_geometry(type_id: u32) -> Option<(u64, u64)> {
    Some(match type_id {
        0 => (1, 4),     // F32
        1 => (1, 2),     // F16
        2 => (32, 18),   // Q4_0
        3 => (32, 20),   // Q4_1
        6 => (32, 22),   // Q5_0
        7 => (32, 24),   // Q5_1
        8 => (32, 34),   // Q8_0
        9 => (32, 36),   // Q8_1
        10 => (256, 84), // Q2_K
        11 => (256, 110),
        12 => (256, 144),
        13 => (256, 176),
        14 => (256, 210),
        15 => (256, 292), // Q8_K
        16 => (256, 66),  // IQ2_XXS
        17 => (256, 74),
        18 => (256, 98),
        19 => (256, 50),
        20 => (32, 18),
        21 => (256, 110),
        22 => (256, 82),
        23 => (256, 136),
        24 => (1, 1), // I8
        25 => (1, 2),
        26 => (1, 4),
        27 => (1, 8),
        28 => (1, 8), // F64
        29 => (256, 56),
        30 => (1, 2), // BF16
        34 => (256, 54),
        35 => (256, 66),
        39 => (32, 17), // MXFP4
        // Ultra's group-wise formats (`quant::intn`), outside ggml's range.
        id => crate::quant::intn::Intn::from_type_id(id).map(|f| (f.block_len() as u64, f.block_bytes() as u64))?,
    })
}
