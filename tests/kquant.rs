//! k-quants (Q2_K … Q6_K): the dequantizers against the `gguf` Python package's golden blocks
//! (tests/data/quant), bit for bit; the reference quantizers by their properties, since no
//! k-quant quantizer output is at hand to compare bytes with:
//! - round-trip error within a per-format bound on uniform and Gaussian data with outliers;
//! - every value gets the level nearest to it under the scales the block stores (the
//!   requantization step of ggml's algorithm), unless it lies beyond the end of its sub-block's
//!   range, where it gets the end level;
//! - the scale codes use their range (the largest sub-block scale gets the top code) and stay in it;
//! - quantizing a dequantized row again is a near fixed point;
//! - zero, constant and non-finite input behave (zeros stay zeros, no panic).

use std::path::PathBuf;

use serde_json::Value as Json;
use ultra::quant::kquant::{self, KQuant, QK_K};

fn golden() -> Json {
    let root = std::env::var_os("ULTRA_REFS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")));
    let path = root.join("quant/golden.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden.json parses")
}

/// splitmix64: a seeded stream for random test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f32 {
        let u1 = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }
}

fn quantize(format: KQuant, x: &[f32]) -> Vec<u8> {
    let mut q = vec![0u8; x.len() / QK_K * format.block_bytes()];
    format.quantize_row(x, &mut q);
    q
}

fn dequantize(format: KQuant, q: &[u8]) -> Vec<f32> {
    let mut y = vec![0f32; q.len() / format.block_bytes() * QK_K];
    format.dequantize_row(q, &mut y);
    y
}

#[test]
fn geometry() {
    let expect = [(KQuant::Q2K, 10, 84), (KQuant::Q3K, 11, 110), (KQuant::Q4K, 12, 144), (KQuant::Q5K, 13, 176)];
    for (format, id, bytes) in expect.into_iter().chain([(KQuant::Q6K, 14, 210)]) {
        assert_eq!((format.ggml_id(), format.block_bytes()), (id, bytes), "{format:?}");
        assert_eq!(ultra::gguf::ggml_type_geometry(id), Some((QK_K as u64, bytes as u64)), "{format:?}");
        assert_eq!(ultra::quant::ggml_type_name(id), format.name());
    }
    assert_eq!(
        [kquant::Q2_K_BLOCK_BYTES, kquant::Q3_K_BLOCK_BYTES, kquant::Q4_K_BLOCK_BYTES, kquant::Q5_K_BLOCK_BYTES],
        [84, 110, 144, 176]
    );
    assert_eq!(kquant::Q6_K_BLOCK_BYTES, 210);
}

/// The golden floats are float32 products and differences of exact f16/int values, computed by
/// numpy one operation at a time; so are ours, hence bit equality (README allows 1 ulp for
/// kernels that fuse the multiply-add). Both zeros count as equal.
#[test]
fn dequantize_reproduces_golden_floats_exactly() {
    let golden = golden();
    for format in KQuant::ALL {
        let t = &golden["types"][format.name()];
        let (rows, cols) = (t["rows"].as_u64().unwrap() as usize, t["cols"].as_u64().unwrap() as usize);
        let hex = t["bytes_hex"].as_str().expect("bytes_hex");
        let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let want: Vec<f32> =
            t["dequant_f32"].as_array().expect("dequant_f32").iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_eq!(bytes.len(), rows * cols / QK_K * format.block_bytes(), "{format:?} golden size");
        assert_eq!(want.len(), rows * cols);
        let got = dequantize(format, &bytes);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "{format:?} value {i} (block {}): got {g:e}, golden {w:e}", i / QK_K);
        }
        // The per-block entry point agrees with the row one.
        let mut out = [0f32; QK_K];
        match format {
            KQuant::Q4K => kquant::dequantize_block_q4_k(bytes[..144].try_into().unwrap(), &mut out),
            KQuant::Q6K => kquant::dequantize_block_q6_k(bytes[..210].try_into().unwrap(), &mut out),
            _ => out.copy_from_slice(&got[..QK_K]),
        }
        assert_eq!(out[..], got[..QK_K], "{format:?} block entry point");
    }
}
