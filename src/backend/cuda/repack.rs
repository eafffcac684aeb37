//! The device layout of k-quant weights: GGUF's 256-value super-blocks rearranged into 32-value
//! blocks, so the kernels' bodies (cuda/matmul.cu, matmul_mma.cu, embed.cu) walk a k-quant row in
//! the same 32-value steps as a legacy one, one lane per block, with 16- or 8-byte loads.
//!
//! Three arrays, as the kernels take them (`qs`, `qh`, `dm`); blocks are numbered row-major over
//! the whole weight (block b is values 32·(b%(cols/32))… of row b/(cols/32)), super-block b/8:
//! - `qs`: each block's low bits. 4-bit (Q4_K, Q5_K, Q6_K): 16 bytes, byte i holding value i in
//!   its low nibble and value i + 16 in its high one (Q4_0's order). 2-bit (Q2_K, Q3_K): 8 bytes,
//!   word h (h = 0, 1), byte i, bits 2p holding value 16h + 4p + i, so `(word >> 2p) & 0x03030303`
//!   is values 4p..4p+3 of a half, one per byte, as dp4a and the tensor-core fragments want them.
//! - `qh`: each block's high bits. Q3_K, Q5_K: a u32, bit i for value i (Q5_0's order). Q6_K: the
//!   2-bit high parts, 8 bytes in the 2-bit order above. Q2_K, Q4_K: none.
//! - `dm`: one record per super-block, GGUF's own scale bytes: Q4_K, Q5_K: its first 16 bytes
//!   (f16 d, f16 dmin, twelve bytes of 6-bit scales and mins); Q2_K: the 16 scale/min bytes, then
//!   f16 d and dmin (20 bytes); Q3_K: the 12 scale bytes, f16 d, 2 zero bytes (16); Q6_K: the
//!   16 i8 scales, f16 d, 2 zero bytes (20). The zero bytes keep records 4-byte aligned for the
//!   tensor-core kernel's async copies (Q3_K, Q6_K grow by 2 bytes per super-block: 1.8%, 1%).
//!
//! GGUF's order would have a 32-value block's bits spread over a 32- or 64-byte span shared with
//! its neighbours (Q4_K's blocks 2i and 2i+1 share bytes, low and high nibbles): each lane would
//! load 2–4× the bytes it uses. The values, scales and every product are unchanged.
//!
//! The group-wise formats (`quant::intn`) become two arrays, `qs` and `dm` ([`repack_intn`]): each
//! 32-value run's values in the legacy/k-quant orders above (4-bit as Q4_0, 2-bit as Q2_K, 8-bit
//! as Q8_0's signed bytes: q - 128, the file's top bit flipped), and each block's 4-byte header
//! as it is. The file packs value i at bit b·i, so a 4-bit byte holds two neighbours, which a
//! dp4a lane would have to pull apart.

use rayon::prelude::*;

use crate::quant::intn::{HEADER_BYTES, Intn};
use crate::quant::{Format, kquant::QK_K};

/// The three device arrays of a k-quant weight (see the module docs).
pub struct Repacked {
    pub qs: Vec<u8>,
    pub qh: Vec<u8>,
    pub dm: Vec<u8>,
}

/// Bytes of one super-block's scale record in `dm`.
pub const fn record_bytes(format: Format) -> usize {
    match format {
        Format::Q2_K | Format::Q6_K => 20,
        _ => 16,
    }
}

/// Bytes per 32-value block in `qs` and in `qh`.
const fn block_bytes(format: Format) -> (usize, usize) {
    match format {
        Format::Q2_K => (8, 0),
        Format::Q3_K => (8, 4),
        Format::Q4_K => (16, 0),
        Format::Q5_K => (16, 4),
        _ => (16, 8),
    }
}

/// Rearranges whole super-blocks of a k-quant (`src.len()` a multiple of its block bytes), in
/// parallel over runs of super-blocks (an 8B model's weights are ~5 GB).
pub fn repack(format: Format, src: &[u8]) -> Repacked {
    debug_assert!(format.is_kquant());
    const RUN: usize = 256;
    let n = src.len() / format.block_bytes();
    let ((qs_len, qh_len), rec) = (block_bytes(format), record_bytes(format));
    // A format without high bits still gets one byte per block to walk (dropped below).
    let qh_walk = qh_len.max(1);
    let mut out = Repacked { qs: vec![0; n * 8 * qs_len], qh: vec![0; n * 8 * qh_walk], dm: vec![0; n * rec] };
    src.par_chunks(RUN * format.block_bytes())
        .zip(out.qs.par_chunks_mut(RUN * 8 * qs_len))
        .zip(out.qh.par_chunks_mut(RUN * 8 * qh_walk))
        .zip(out.dm.par_chunks_mut(RUN * rec))
        .for_each(|(((src, qs), qh), dm)| {
            let blocks = src.chunks_exact(format.block_bytes());
            let outs =
                qs.chunks_exact_mut(8 * qs_len).zip(qh.chunks_exact_mut(8 * qh_walk)).zip(dm.chunks_exact_mut(rec));
            blocks.zip(outs).for_each(|(block, ((qs, qh), dm))| repack_block(format, block, qs, qh, dm));
        });
    if qh_len == 0 {
        out.qh = Vec::new();
    }
    out
}

/// One super-block into its 8 blocks of `qs` and `qh` and its record.
fn repack_block(format: Format, block: &[u8], qs: &mut [u8], qh: &mut [u8], dm: &mut [u8]) {
    let levels: [u8; QK_K] = std::array::from_fn(|v| level(format, block, v));
    let (qs_len, qh_len) = block_bytes(format);
    for (j, b) in levels.chunks_exact(32).enumerate() {
        let (qs, qh) = (&mut qs[j * qs_len..(j + 1) * qs_len], &mut qh[j * qh_len..(j + 1) * qh_len]);
        match format {
            Format::Q2_K => qs.copy_from_slice(&two_bit(b, 0)),
            Format::Q3_K => {
                qs.copy_from_slice(&two_bit(b, 0));
                qh.copy_from_slice(&bit_per_value(b, 2));
            }
            Format::Q4_K => qs.copy_from_slice(&nibbles(b)),
            Format::Q5_K => {
                qs.copy_from_slice(&nibbles(b));
                qh.copy_from_slice(&bit_per_value(b, 4));
            }
            _ => {
                qs.copy_from_slice(&nibbles(b));
                qh.copy_from_slice(&two_bit(b, 4));
            }
        }
    }
    // The record: GGUF's scale bytes (zeros already fill the padding).
    let parts: &[&[u8]] = match format {
        Format::Q2_K => &[&block[..16], &block[80..84]],
        Format::Q3_K => &[&block[96..110]],
        Format::Q4_K | Format::Q5_K => &[&block[..16]],
        _ => &[&block[192..210]],
    };
    let mut at = 0;
    for part in parts {
        dm[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
}

/// Value v's stored level (its unsigned bits, before any offset or scale): Q2_K 0..=3, Q3_K
/// 0..=7 (its low two bits and the hmask bit as bit 2), Q4_K 0..=15, Q5_K 0..=31, Q6_K 0..=63.
/// Bit positions as `quant::kquant`'s files state them.
fn level(format: Format, block: &[u8], v: usize) -> u8 {
    let two_bit = |qs: &[u8]| (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
    let nibble = |qs: &[u8]| (qs[32 * (v / 64) + v % 32] >> (4 * ((v % 64) / 32))) & 15;
    let high = |qh: &[u8]| (qh[v % 32] >> (v / 32)) & 1;
    match format {
        Format::Q2_K => two_bit(&block[16..80]),
        Format::Q3_K => two_bit(&block[32..96]) | high(&block[..32]) << 2,
        Format::Q4_K => nibble(&block[16..144]),
        Format::Q5_K => nibble(&block[48..176]) | high(&block[16..48]) << 4,
        _ => {
            let (h, r) = (v / 128, v % 128);
            let (k, l) = (r / 32, r % 32);
            let low = (block[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 15;
            low | ((block[128 + 32 * h + l] >> (2 * k)) & 3) << 4
        }
    }
}

/// 32 levels' low nibbles: byte i = value i | value i + 16 << 4.
fn nibbles(l: &[u8]) -> [u8; 16] {
    std::array::from_fn(|i| (l[i] & 15) | (l[i + 16] & 15) << 4)
}

/// Bits shift..shift+2 of 32 levels: byte 4h + i, bits 2p = value 16h + 4p + i.
fn two_bit(l: &[u8], shift: u32) -> [u8; 8] {
    std::array::from_fn(|at| {
        let (h, i) = (at / 4, at % 4);
        (0..4).fold(0, |byte, p| byte | ((l[16 * h + 4 * p + i] >> shift) & 3) << (2 * p))
    })
}

/// Bit `bit` of 32 levels as a little-endian u32, bit i for value i.
fn bit_per_value(l: &[u8], bit: u32) -> [u8; 4] {
    let word = l.iter().enumerate().fold(0u32, |w, (i, &q)| w | (((q >> bit) & 1) as u32) << i);
    word.to_le_bytes()
}

/// A group-wise weight (whole blocks of `f`) as the kernels read it: (`qs`, `dm`), see the module docs.
pub fn repack_intn(f: Intn, src: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (bits, block_len) = (f.scheme.bits(), f.block_len());
    let blocks = src.chunks_exact(f.block_bytes());
    let (mut qs, mut dm) = (Vec::with_capacity(src.len()), Vec::with_capacity(blocks.len() * HEADER_BYTES));
    for block in blocks {
        let (header, data) = block.split_at(HEADER_BYTES);
        dm.extend_from_slice(header);
        if bits == 8 {
            qs.extend(data.iter().map(|q| q ^ 0x80));
            continue;
        }
        let levels: Vec<u8> =
            (0..block_len).map(|i| (data[bits * i / 8] >> (bits * i % 8)) & ((1 << bits) - 1)).collect();
        for run in levels.chunks_exact(32) {
            match bits {
                4 => qs.extend_from_slice(&nibbles(run)),
                _ => qs.extend_from_slice(&two_bit(run, 0)),
            }
        }
    }
    (qs, dm)
}
