//! The kernels' layout of a weight: one word-aligned section per field of the format's blocks
//! (`Format::fields`), each the field's bytes of every block back to back. The legacy formats'
//! sections are their GGUF bytes as they are: `qs` (16 or 32 quant bytes a block) | `qh` (Q5's
//! fifth bits, a word a block) | scales (`d` of two blocks per word, or `(d, m)` of one block per
//! word); float formats are one section, their values.
//!
//! The k-quants' bit planes are reordered within each super-block so that every 32-value block
//! (what a GEMV lane reads whole, `decode32_*.wgsl`) owns contiguous words laid out as the legacy
//! blocks are: ggml interleaves 64 or 128 values across each run of quant bytes, which would make
//! a lane load twice the bytes it uses (or gather across words). Sizes do not change. Per 32 values:
//! - 4-bit parts (Q4_K/Q5_K `qs`, Q6_K `ql`): 16 bytes, byte i = value i | value i + 16 << 4
//!   (as Q4_0);
//! - 2-bit parts (Q2_K/Q3_K `qs`, Q6_K `qh`): 2 words of 16 values, value l of a word at byte
//!   l % 4, bits 2·(l / 4) (so one shift and mask of a word gives a quad of consecutive values);
//! - 1-bit parts (Q3_K `hmask`, Q5_K `qh`): one word, bit l = value l (as Q5_0's `qh`).
//!
//! The group-wise formats (`quant::intn`) pack value i at bit b·i (two neighbours per 4-bit byte):
//! their 4-bit codes are laid out per 32 values as the 4-bit parts above, INT2's as the 2-bit parts,
//! INT8's bytes and every block's 4-byte header stay as they are.
//!
//! Scales (`scales`, `d`, `dm`) keep their GGUF bytes. The sizes add up to the GGUF bytes (up to
//! padding).

use crate::quant::intn::{HEADER_BYTES, NF4, Scheme};
use crate::quant::{BlockField, Format};

/// The words of a weight in the kernels' layout and the word offset of each section
/// (`Format::fields` order, then NF4's level table).
pub fn repack(format: Format, src: &[u8]) -> (Vec<u32>, Vec<u32>) {
    let mut bytes: Vec<u8> = Vec::with_capacity(src.len() + 16 * format.fields().len());
    let mut offsets = Vec::with_capacity(format.fields().len());
    for &f in format.fields() {
        offsets.push((bytes.len() / 4) as u32);
        for block in src.chunks_exact(format.block_bytes()) {
            match plane(format, f) {
                Some((bits, level)) => push_planes(&mut bytes, bits, format.block_len() / 32, |v| level(block, v)),
                None => bytes.extend_from_slice(&block[f.start..f.end]),
            }
        }
        bytes.resize(bytes.len().next_multiple_of(4), 0);
    }
    // NF4: one more section (info.sc), vec4-aligned: the 16 levels as f32 bits (shaders/intn.wgsl),
    // then 256 vec4 entries (NF4[c & 15], NF4[c >> 4], 0, 0), c a code byte (shaders/nf4_pairs.wgsl).
    if matches!(format, Format::Intn(f) if matches!(f.scheme, Scheme::Nf4 | Scheme::Nf4Dq)) {
        bytes.resize(bytes.len().next_multiple_of(16), 0);
        offsets.push((bytes.len() / 4) as u32);
        NF4.iter().for_each(|l| bytes.extend_from_slice(&l.to_le_bytes()));
        for c in 0..256 {
            for l in [NF4[c & 15], NF4[c >> 4], 0.0, 0.0] {
                bytes.extend_from_slice(&l.to_le_bytes());
            }
        }
    }
    // Whole vec4s: matmul_vec binds the buffer as array<vec4<u32>>.
    bytes.resize(bytes.len().next_multiple_of(16), 0);
    let words = bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    (words, offsets)
}

/// Reads one bit plane of a block: value v's part (v in 0..block_len), GGUF layout.
type Level = fn(&[u8], usize) -> u8;

/// For a k-quant field that is a bit plane: its bits per value and how to read value v's part
/// (the dequantizers' addressing, `src/quant/kquant/`); None for fields kept as they are.
fn plane(format: Format, field: BlockField) -> Option<(u32, Level)> {
    Some(match (format, field.name) {
        (Format::Q4_K, "qs") => (4, |b, v| nibble_k(b, 16, v)),
        (Format::Q5_K, "qs") => (4, |b, v| nibble_k(b, 48, v)),
        (Format::Q5_K, "qh") => (1, |b, v| b[16 + v % 32] >> (v / 32) & 1),
        (Format::Q3_K, "hmask") => (1, |b, v| b[v % 32] >> (v / 32) & 1),
        (Format::Q2_K, "qs") => (2, |b, v| crumb_k(b, 16, v)),
        (Format::Q3_K, "qs") => (2, |b, v| crumb_k(b, 32, v)),
        // Q6_K: with h = v/128 and quarter k = (v%128)/32, the nibble of ql[64h + 32·(k%2) + v%32]
        // (high for k ≥ 2) and bits 2k of qh[32h + v%32].
        (Format::Q6_K, "ql") => (4, |b, v| b[64 * (v / 128) + 32 * (v / 32 % 2) + v % 32] >> (4 * (v / 64 % 2)) & 0xf),
        (Format::Q6_K, "qh") => (2, |b, v| b[128 + 32 * (v / 128) + v % 32] >> (2 * (v / 32 % 4)) & 3),
        (Format::Intn(f), "qs") if f.scheme.bits() == 4 => (4, |b, v| b[HEADER_BYTES + v / 2] >> (4 * (v % 2)) & 0xf),
        (Format::Intn(f), "qs") if f.scheme.bits() == 2 => (2, |b, v| b[HEADER_BYTES + v / 4] >> (2 * (v % 4)) & 3),
        _ => return None,
    })
}

/// Q4_K/Q5_K nibbles from byte `at`: byte 32·(v/64) + v%32, the high nibble for v%64 ≥ 32.
fn nibble_k(b: &[u8], at: usize, v: usize) -> u8 {
    b[at + 32 * (v / 64) + v % 32] >> (4 * (v / 32 % 2)) & 0xf
}

/// Q2_K/Q3_K 2-bit parts from byte `at`: byte 32·(v/128) + v%32, bits 2·((v%128)/32).
fn crumb_k(b: &[u8], at: usize, v: usize) -> u8 {
    b[at + 32 * (v / 128) + v % 32] >> (2 * (v % 128 / 32)) & 3
}

/// Appends one block's plane of `bits`-bit parts, 32 values at a time (`runs` of them; module doc).
fn push_planes(bytes: &mut Vec<u8>, bits: u32, runs: usize, level: impl Fn(usize) -> u8) {
    for blk in 0..runs {
        let lv = |l: usize| level(32 * blk + l) as u32;
        let words: Vec<u32> = match bits {
            4 => (0..4).map(|w| (0..4).map(|e| (lv(4 * w + e) | lv(4 * w + e + 16) << 4) << (8 * e)).sum()).collect(),
            2 => (0..2).map(|w| (0..16).map(|l| lv(16 * w + l) << (8 * (l % 4) + 2 * (l / 4))).sum()).collect(),
            _ => vec![(0..32).map(|l| lv(l) << l).sum()],
        };
        words.iter().for_each(|w| bytes.extend_from_slice(&w.to_le_bytes()));
    }
}
