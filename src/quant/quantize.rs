//! Reference quantizers: ggml's `quantize_row_*_ref` (ggml-quants.c), reproducing bit for bit the
//! bytes of the `gguf` Python package (0.19.0), which mirrors them in numpy. `tests/quant.rs`
//! checks every format against `tests/data/quant/golden.json`.
//! The k-quants (Q2_K … Q6_K) are in `kquant/`, checked against ggml's own C output
//! (`tests/kquant.rs`); what follows is about the 32-value formats.
//!
//! Numerics, and where the two references could part ways:
//! - `roundf` (Q8_0) rounds halves away from zero; numpy's `np_roundf` helper does the same, and
//!   so does our `round_half_away`.
//! - Q4_0 and Q5_0 take `(int8_t)(x*id + 8.5f)`, whose result in C depends on whether the compiler
//!   fuses the multiply-add. The Python package pins it: the product and the sum in f64, rounded
//!   once to f32, then truncated. We do the same, so we match the package (and, but for rare
//!   double-rounding ties, FMA builds of ggml). For a block of zeros that starts with -0.0 the
//!   package's scale is +0.0 where ggml's is -0.0 (see `signed_absmax`); we follow the package.
//! - Q4_1 and Q5_1 round `(x - min)*id + 0.5` step by step in f32 (no FMA), as both do; Rust
//!   never contracts a multiply and an add on its own.
//! - F16 is IEEE round-to-nearest-even (numpy's `astype(float16)`, `half`), overflow to infinity.
//! - BF16 is ggml's `ggml_compute_fp32_to_bf16`: round to nearest even on the top 16 bits, and a
//!   NaN keeps its sign and high payload with the quiet bit forced on.
//!
//! Non-finite inputs give some (unspecified) bytes, never a panic.

use half::f16;

use super::{Format, kquant};

/// Appends the encoding of `src` in `format` to `dst`.
/// Panics if `src.len()` is not a whole number of blocks (callers size rows with
/// `Format::row_bytes`, which reports that as an error).
pub fn quantize_row(format: Format, src: &[f32], dst: &mut Vec<u8>) {
    assert!(
        src.len().is_multiple_of(format.block_len()),
        "quantize_row: {} values are not whole {} blocks",
        src.len(),
        format.name()
    );
    let start = dst.len();
    dst.resize(start + src.len() / format.block_len() * format.block_bytes(), 0);
    quantize_row_into(format, src, &mut dst[start..]);
}

/// Writes the encoding of `src` in `format` over `dst`, which holds exactly that many bytes.
/// Panics if the lengths disagree.
pub fn quantize_row_into(format: Format, src: &[f32], dst: &mut [u8]) {
    let n_blocks = src.len() / format.block_len();
    assert!(
        src.len().is_multiple_of(format.block_len()) && dst.len() == n_blocks * format.block_bytes(),
        "quantize_row_into: {} values do not fill {} bytes of {}",
        src.len(),
        dst.len(),
        format.name()
    );
    let blocks = src.chunks_exact(format.block_len());
    let outs = dst.chunks_exact_mut(format.block_bytes());
    match format {
        Format::F32 => blocks.zip(outs).for_each(|(x, y)| y.copy_from_slice(&x[0].to_le_bytes())),
        Format::F16 => blocks.zip(outs).for_each(|(x, y)| y.copy_from_slice(&f16::from_f32(x[0]).to_le_bytes())),
        Format::BF16 => blocks.zip(outs).for_each(|(x, y)| y.copy_from_slice(&f32_to_bf16_bits(x[0]).to_le_bytes())),
        Format::Q4_0 => blocks.zip(outs).for_each(|(x, y)| q4_0(x, y)),
        Format::Q4_1 => blocks.zip(outs).for_each(|(x, y)| q4_1(x, y)),
        Format::Q5_0 => blocks.zip(outs).for_each(|(x, y)| q5_0(x, y)),
        Format::Q5_1 => blocks.zip(outs).for_each(|(x, y)| q5_1(x, y)),
        Format::Q8_0 => blocks.zip(outs).for_each(|(x, y)| q8_0(x, y)),
        Format::Q2_K => kquant::quantize_row_q2_k(src, dst),
        Format::Q3_K => kquant::quantize_row_q3_k(src, dst),
        Format::Q4_K => kquant::quantize_row_q4_k(src, dst),
        Format::Q5_K => kquant::quantize_row_q5_k(src, dst),
        Format::Q6_K => kquant::quantize_row_q6_k(src, dst),
        Format::Intn(f) => super::intn::quantize_block_row(f, src, dst),
    }
}

/// ggml_compute_fp32_to_bf16: quiet NaNs, otherwise round to nearest even.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7fff_ffff > 0x7f80_0000 {
        return ((bits >> 16) | 64) as u16;
    }
    // No overflow: the largest non-NaN pattern plus 0x8000 stays below 2^32.
    ((bits + (0x7fff + ((bits >> 16) & 1))) >> 16) as u16
}

fn put_f16(y: &mut [u8], at: usize, v: f32) {
    y[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// The value of largest magnitude, with its sign: the first one on ties, as numpy's `argmax`.
/// (ggml's loop differs in one corner: for a block of zeros starting with -0.0 it keeps +0.0,
/// making its scale -0.0 where the package's is +0.0. Both dequantize to zeros; we follow the
/// package, whose bytes are the golden ones.)
fn signed_absmax(x: &[f32; 32]) -> f32 {
    let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    x.iter().position(|v| v.abs() == amax).map_or(0.0, |i| x[i])
}

fn min_max(x: &[f32; 32]) -> (f32, f32) {
    x.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// 1/d, or 0 for an all-zero block.
fn inverse(d: f32) -> f32 {
    if d == 0.0 { 0.0 } else { 1.0 / d }
}

/// trunc(x·id + bias) with the product and sum in f64, rounded once to f32 (the package's
/// "FMA" rounding for Q4_0/Q5_0), clamped to 0..=max. `as i32` truncates toward zero.
fn fused_levels(x: &[f32; 32], id: f32, bias: f64, max: i32) -> [u8; 32] {
    let mut levels = [0u8; 32];
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = ((v as f64 * id as f64 + bias) as f32 as i32).clamp(0, max) as u8;
    }
    levels
}

/// trunc((x - min)·id + 0.5), each step rounded in f32, clamped to 0..=max.
fn affine_levels(x: &[f32; 32], min: f32, id: f32, max: i32) -> [u8; 32] {
    let mut levels = [0u8; 32];
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = (((v - min) * id + 0.5) as i32).clamp(0, max) as u8;
    }
    levels
}

/// Packs 32 levels as nibbles (value j low, value j+16 high) into 16 bytes, and their fifth
/// bits into a u32 (bit j for value j).
fn pack(levels: &[u8; 32], qs: &mut [u8]) -> u32 {
    for j in 0..16 {
        qs[j] = (levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4);
    }
    levels.iter().enumerate().fold(0u32, |qh, (j, &q)| qh | (((q as u32 >> 4) & 1) << j))
}

fn block(x: &[f32]) -> &[f32; 32] {
    x.try_into().expect("blocks of quantized formats hold 32 values")
}

/// Q4_0: d = max/-8, q = trunc(x/d + 8.5) in 0..=15.
fn q4_0(x: &[f32], y: &mut [u8]) {
    let x = block(x);
    let d = signed_absmax(x) / -8.0;
    put_f16(y, 0, d);
    pack(&fused_levels(x, inverse(d), 8.5, 15), &mut y[2..18]);
}

/// Q4_1: d = (max - min)/15, m = min, q = trunc((x - min)/d + 0.5) in 0..=15.
fn q4_1(x: &[f32], y: &mut [u8]) {
    let x = block(x);
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    put_f16(y, 0, d);
    put_f16(y, 2, min);
    pack(&affine_levels(x, min, inverse(d), 15), &mut y[4..20]);
}

/// Q5_0: d = max/-16, q = trunc(x/d + 16.5) in 0..=31.
fn q5_0(x: &[f32], y: &mut [u8]) {
    let x = block(x);
    let d = signed_absmax(x) / -16.0;
    put_f16(y, 0, d);
    let qh = pack(&fused_levels(x, inverse(d), 16.5, 31), &mut y[6..22]);
    y[2..6].copy_from_slice(&qh.to_le_bytes());
}

/// Q5_1: d = (max - min)/31, m = min, q = trunc((x - min)/d + 0.5) in 0..=31.
fn q5_1(x: &[f32], y: &mut [u8]) {
    let x = block(x);
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    put_f16(y, 0, d);
    put_f16(y, 2, min);
    let qh = pack(&affine_levels(x, min, inverse(d), 31), &mut y[8..24]);
    y[4..8].copy_from_slice(&qh.to_le_bytes());
}

/// Q8_0: d = max|x|/127, q = roundf(x/d).
fn q8_0(x: &[f32], y: &mut [u8]) {
    let x = block(x);
    let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    for (q, &v) in y[2..34].iter_mut().zip(x) {
        *q = round_half_away(v * id).clamp(-128, 127) as i8 as u8;
    }
}

/// `roundf` for |v| < 2^23 (levels here are within ±128): truncate, then step away from zero
/// when the dropped fraction is at least one half. (`f32::round` is a libm call on baseline
/// x86-64; this form vectorizes. The subtraction is exact.)
fn round_half_away(v: f32) -> i32 {
    let t = v as i32;
    let frac = v - t as f32;
    t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}
