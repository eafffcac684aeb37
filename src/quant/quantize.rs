//! Reference quantizers: ggml's `quantize_row_*_ref` (ggml-quants.c), reproducing bit for bit the
//! bytes of the `gguf` Python package (0.19.0), which mirrors them in numpy. `tests/quant.rs`
//! checks every format against `tests/data/quant/golden.json`.
//!
//! Numerics, and where the two references could part ways:
//! - `roundf` (Q8_0) rounds halves away from zero; numpy's `np_roundf` helper does the same, and
//!   Rust's `f32::round` is exactly that.
//! - Q4_0 and Q5_0 take `(int8_t)(x*id + 8.5f)`, whose result in C depends on whether the compiler
//!   fuses the multiply-add. The Python package pins it: the product and the sum in f64, rounded
//!   once to f32, then truncated. We do the same, so we match the package (and FMA builds of ggml).
//! - Q4_1 and Q5_1 round `(x - min)*id + 0.5` step by step in f32 (no FMA), as both do; Rust
//!   never contracts a multiply and an add on its own.
//! - F16 is IEEE round-to-nearest-even (numpy's `astype(float16)`, `half`), overflow to infinity.
//! - BF16 is ggml's `ggml_compute_fp32_to_bf16`: round to nearest even on the top 16 bits, and a
//!   NaN keeps its sign and high payload with the quiet bit forced on.
//!
//! Non-finite inputs give some (unspecified) bytes, never a panic.

use half::f16;

use super::Format;

/// Appends the encoding of `src` in `format` to `dst`.
/// Panics if `src.len()` is not a whole number of blocks (callers size rows with
/// `Format::row_bytes`, which reports that as an error).
pub fn quantize_row(format: Format, src: &[f32], dst: &mut Vec<u8>) {
    assert!(
        src.len() % format.block_len() == 0,
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
        src.len() % format.block_len() == 0 && dst.len() == n_blocks * format.block_bytes(),
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

/// The value of largest magnitude, keeping its sign (the first one on ties).
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// 1/d, or 0 for an all-zero block.
fn inverse(d: f32) -> f32 {
    if d == 0.0 { 0.0 } else { 1.0 / d }
}

/// trunc(x·id + bias) with the product and sum in f64, rounded once to f32 (the package's
/// "FMA" rounding for Q4_0/Q5_0), clamped to 0..=max.
fn fused_level(x: f32, id: f32, bias: f64, max: u8) -> u8 {
    ((x as f64 * id as f64 + bias) as f32).trunc().clamp(0.0, max as f32) as u8
}

/// trunc((x - min)·id + 0.5), each step rounded in f32, clamped to 0..=max.
fn affine_level(x: f32, min: f32, id: f32, max: u8) -> u8 {
    ((x - min) * id + 0.5).trunc().clamp(0.0, max as f32) as u8
}

/// Packs 32 levels as nibbles (value j low, value j+16 high) into 16 bytes, and their fifth
/// bits into a u32 (bit j for value j).
fn pack(levels: &[u8; 32], qs: &mut [u8]) -> u32 {
    let mut qh = 0u32;
    for j in 0..16 {
        qs[j] = (levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4);
    }
    for (j, &q) in levels.iter().enumerate() {
        qh |= ((q as u32 >> 4) & 1) << j;
    }
    qh
}

/// Q4_0: d = max/-8, q = trunc(x/d + 8.5) in 0..=15.
fn q4_0(x: &[f32], y: &mut [u8]) {
    let d = signed_absmax(x) / -8.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    let levels: [u8; 32] = std::array::from_fn(|j| fused_level(x[j], id, 8.5, 15));
    pack(&levels, &mut y[2..18]);
}

/// Q4_1: d = (max - min)/15, m = min, q = trunc((x - min)/d + 0.5) in 0..=15.
fn q4_1(x: &[f32], y: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    put_f16(y, 2, min);
    let levels: [u8; 32] = std::array::from_fn(|j| affine_level(x[j], min, id, 15));
    pack(&levels, &mut y[4..20]);
}

/// Q5_0: d = max/-16, q = trunc(x/d + 16.5) in 0..=31.
fn q5_0(x: &[f32], y: &mut [u8]) {
    let d = signed_absmax(x) / -16.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    let levels: [u8; 32] = std::array::from_fn(|j| fused_level(x[j], id, 16.5, 31));
    let qh = pack(&levels, &mut y[6..22]);
    y[2..6].copy_from_slice(&qh.to_le_bytes());
}

/// Q5_1: d = (max - min)/31, m = min, q = trunc((x - min)/d + 0.5) in 0..=31.
fn q5_1(x: &[f32], y: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    put_f16(y, 2, min);
    let levels: [u8; 32] = std::array::from_fn(|j| affine_level(x[j], min, id, 31));
    let qh = pack(&levels, &mut y[8..24]);
    y[4..8].copy_from_slice(&qh.to_le_bytes());
}

/// Q8_0: d = max|x|/127, q = roundf(x/d).
fn q8_0(x: &[f32], y: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    put_f16(y, 0, d);
    for (q, &v) in y[2..34].iter_mut().zip(x) {
        *q = ((v * id).round() as i8) as u8;
    }
}
