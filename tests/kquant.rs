//! k-quants (Q2_K … Q6_K) against two references in tests/data/quant: the `gguf` Python
//! package's golden blocks (our dequantizers reproduce its floats bit for bit) and ggml's own C
//! reference quantizers (our quantizers reproduce their bytes, see the README there). And by
//! their properties, on more data than the references hold:
//! - round-trip error within a per-format bound on uniform, Gaussian and all-positive data;
//! - every value gets the level nearest to it under the scales the block stores (the
//!   requantization step of ggml's algorithm), or the end level when it lies beyond the range;
//! - the scale codes use their range (the largest sub-block scale gets the top code);
//! - quantizing a dequantized row again is a near fixed point;
//! - zero, constant and non-finite input behave (zeros stay zeros, no panic).

mod common;

use std::path::PathBuf;

use common::rng::Rng;
use serde_json::Value as Json;
use ultra::Format;
use ultra::quant::kquant::{self, QK_K};
use ultra::quant::{dequantize_row, quantize_row_into};

const KQUANTS: [Format; 5] = [Format::Q2_K, Format::Q3_K, Format::Q4_K, Format::Q5_K, Format::Q6_K];

/// `$ULTRA_REFS`, else tests/data.
fn refs_root() -> PathBuf {
    std::env::var_os("ULTRA_REFS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")))
}

fn golden() -> Json {
    let path = refs_root().join("quant/golden.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden.json parses")
}

/// What kquant's data needs beyond the shared stream.
trait Normal {
    fn normal(&mut self) -> f32;
}
impl Normal for Rng {
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f32 {
        let u1 = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }
}

fn quantize(format: Format, x: &[f32]) -> Vec<u8> {
    let mut q = vec![0u8; x.len() / QK_K * format.block_bytes()];
    quantize_row_into(format, x, &mut q);
    q
}

fn dequantize(format: Format, q: &[u8]) -> Vec<f32> {
    let mut y = vec![0f32; q.len() / format.block_bytes() * QK_K];
    dequantize_row(format, q, &mut y);
    y
}

#[test]
fn geometry() {
    let expect = [(Format::Q2_K, 10, 84), (Format::Q3_K, 11, 110), (Format::Q4_K, 12, 144), (Format::Q5_K, 13, 176)];
    for (format, id, bytes) in expect.into_iter().chain([(Format::Q6_K, 14, 210)]) {
        assert_eq!((format.ggml_id(), format.block_bytes()), (id, bytes), "{format:?}");
        assert!(format.is_kquant() && format.block_len() == QK_K, "{format:?}");
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
    for format in KQUANTS {
        let t = &golden["types"][format.name()];
        let (rows, cols) = (t["rows"].as_u64().unwrap() as usize, t["cols"].as_u64().unwrap() as usize);
        let hex = t["bytes_hex"].as_str().expect("bytes_hex");
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
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
            Format::Q4_K => kquant::dequantize_block_q4_k(bytes[..144].try_into().unwrap(), &mut out),
            Format::Q6_K => kquant::dequantize_block_q6_k(bytes[..210].try_into().unwrap(), &mut out),
            _ => out.copy_from_slice(&got[..QK_K]),
        }
        assert_eq!(out[..], got[..QK_K], "{format:?} block entry point");
    }
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

/// Our quantizers reproduce, byte for byte, what ggml's own reference quantizers wrote for 54
/// super-blocks of varied data (tests/data/quant/kquant_ggml.json; README.md there says how it
/// was made: ggml's C built without floating-point contraction).
#[test]
fn quantize_reproduces_ggml_bytes() {
    let path = refs_root().join("quant/kquant_ggml.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let refs: Json = serde_json::from_str(&text).expect("kquant_ggml.json parses");
    let source: Vec<f32> = unhex(refs["source_f32_le_hex"].as_str().expect("source"))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(source.len(), refs["blocks"].as_u64().unwrap() as usize * QK_K);
    for format in KQUANTS {
        let want = unhex(refs["types"][format.name()]["bytes_hex"].as_str().expect("bytes_hex"));
        let got = quantize(format, &source);
        assert_eq!(got.len(), want.len(), "{format:?} length");
        if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
            let block = i / format.block_bytes();
            panic!(
                "{format:?}: first differing byte {i} (block {block}, offset {}): ours {:02x}, ggml {:02x}",
                i % format.block_bytes(),
                got[i],
                want[i]
            );
        }
    }
}

/// One sub-block as the block stores it: `x̂ = dl·q - ml` for q in `lo..=hi`, and the values it covers.
struct Sub {
    dl: f32,
    ml: f32,
    lo: i32,
    hi: i32,
    values: std::ops::Range<usize>,
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_K/Q5_K scale and min of sub-block j, read independently of the library.
fn scale_min_k4(s: &[u8], j: usize) -> (f32, f32) {
    let (sc, m) = if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    };
    (sc as f32, m as f32)
}

/// The sub-blocks of one block, parsed from ggml's layouts.
fn subs(format: Format, b: &[u8]) -> Vec<Sub> {
    let sub = |dl, ml, lo, hi, j: usize, n: usize| Sub { dl, ml, lo, hi, values: n * j..n * (j + 1) };
    match format {
        Format::Q2_K => {
            let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
            (0..16).map(|j| sub(d * (b[j] & 15) as f32, dmin * (b[j] >> 4) as f32, 0, 3, j, 16)).collect()
        }
        Format::Q3_K => {
            let (s, d) = (&b[96..108], f16_at(b, 108));
            let sc = |j: usize| {
                let low = if j < 8 { s[j] & 15 } else { s[j - 8] >> 4 };
                ((low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32) as f32
            };
            (0..16).map(|j| sub(d * sc(j), 0.0, -4, 3, j, 16)).collect()
        }
        Format::Q4_K | Format::Q5_K => {
            let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
            let hi = if format == Format::Q4_K { 15 } else { 31 };
            let sm = |j| scale_min_k4(&b[4..16], j);
            (0..8).map(|j| sub(d * sm(j).0, dmin * sm(j).1, 0, hi, j, 32)).collect()
        }
        Format::Q6_K => {
            let d = f16_at(b, 208);
            (0..16).map(|j| sub(d * b[192 + j] as i8 as f32, 0.0, -32, 31, j, 16)).collect()
        }
        other => unreachable!("{other:?} is not a k-quant"),
    }
}

/// The codes of the block's sub-block scales and mins, for the range checks:
/// (scale codes, min codes, the code the largest scale must get).
fn codes(format: Format, b: &[u8]) -> (Vec<i32>, Vec<i32>, i32) {
    match format {
        Format::Q2_K => {
            (b[..16].iter().map(|&c| (c & 15) as i32).collect(), b[..16].iter().map(|&c| (c >> 4) as i32).collect(), 15)
        }
        Format::Q3_K => {
            let s = &b[96..108];
            let sc = (0..16).map(|j| {
                let low = if j < 8 { s[j] & 15 } else { s[j - 8] >> 4 };
                (low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32
            });
            // The largest-magnitude scale maps to -32: ggml's iscale is -32/max_scale.
            (sc.map(|c| -c).collect(), vec![], 32)
        }
        Format::Q4_K | Format::Q5_K => {
            let sm: Vec<(f32, f32)> = (0..8).map(|j| scale_min_k4(&b[4..16], j)).collect();
            (sm.iter().map(|p| p.0 as i32).collect(), sm.iter().map(|p| p.1 as i32).collect(), 63)
        }
        Format::Q6_K => (b[192..208].iter().map(|&c| -(c as i8 as i32)).collect(), vec![], 128),
        other => unreachable!("{other:?} is not a k-quant"),
    }
}

/// Test data: 8 super-blocks of each kind, with edge sub-blocks in the first.
fn data(rng: &mut Rng, kind: usize, scale: f32) -> Vec<f32> {
    let mut x: Vec<f32> = (0..8 * QK_K)
        .map(|_| match kind {
            0 => rng.uniform() * scale,
            1 => rng.normal() * scale,
            _ => rng.uniform() * scale + scale, // all positive, offset
        })
        .collect();
    x[..32].fill(0.0);
    x[32..64].fill(scale * 0.5);
    x[100] = scale * 12.0; // outlier
    x
}

/// Levels per value of each format (2^bits − 1 steps).
fn steps(format: Format) -> f64 {
    match format {
        Format::Q2_K => 3.0,
        Format::Q3_K => 7.0,
        Format::Q4_K => 15.0,
        Format::Q5_K => 31.0,
        Format::Q6_K => 63.0,
        other => unreachable!("{other:?} is not a k-quant"),
    }
}

fn rms(a: &[f32], b: &[f32]) -> f64 {
    (a.iter().zip(b).map(|(p, q)| (*p as f64 - *q as f64).powi(2)).sum::<f64>() / a.len() as f64).sqrt()
}

/// Round-trip error per super-block, relative to the block's standard deviation, against what a
/// plain uniform grid over the data's range gives on uniform data, `1/(2^bits - 1)` (a step of
/// range/(2^b - 1) has RMS error step/√12; uniform data has standard deviation range/√12). The
/// factor allowed per data kind: uniform 1.25, Gaussian 1.5 (its tails stretch each sub-block's
/// range), all-positive 2.0 (Q3_K and Q6_K are symmetric: half their levels go unused). Data of
/// scale 1e-3 puts the f16 super-block scale in the subnormal range, where it has few digits:
/// twice the factor. (Measured worst cases: 1.0, 1.27, 1.8; 3.0 for Q6_K positive at 1e-3.)
#[test]
fn round_trip_error_is_bounded() {
    let mut rng = Rng(42);
    for format in KQUANTS {
        for (kind, factor) in [(0, 1.25), (1, 1.5), (2, 2.0)] {
            for scale in [1e-3f32, 0.02, 1.0, 300.0] {
                let x = data(&mut rng, kind, scale);
                let y = dequantize(format, &quantize(format, &x));
                let bound = factor * if scale < 0.01 { 2.0 } else { 1.0 } / steps(format);
                // Block 0 holds the edge sub-blocks; it is checked below, by value.
                for (b, (xb, yb)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate().skip(1) {
                    let mean = xb.iter().sum::<f32>() / QK_K as f32;
                    let std = rms(xb, &vec![mean; QK_K]);
                    let rel = rms(xb, yb) / std;
                    assert!(rel <= bound, "{format:?} kind {kind} scale {scale} block {b}: {rel:.4} > {bound:.4}");
                }
                assert!(y[..32].iter().all(|&v| v == 0.0), "{format:?}: a zero sub-block stays zero");
                // (How close it stays depends on the 6-bit code its scale gets next to the outlier
                // in the same super-block; the levels are checked in every_value_gets_its_nearest_level.)
                let flat = &y[32..64];
                assert!(flat.iter().all(|&v| v == flat[0]), "{format:?}: a constant sub-block stays constant");
            }
        }
    }
}

/// ggml's last step requantizes every value against the scales the block stores, so each value
/// must sit on the level nearest to it, or on an end level when it lies beyond that end. The
/// sub-blocks are parsed here from ggml's layouts, independently of the library.
#[test]
fn every_value_gets_its_nearest_level() {
    let mut rng = Rng(7);
    for format in KQUANTS {
        for kind in 0..3 {
            for scale in [1e-3f32, 0.02, 1.0, 300.0] {
                let x = data(&mut rng, kind, scale);
                let q = quantize(format, &x);
                let y = dequantize(format, &q);
                for (b, block) in q.chunks(format.block_bytes()).enumerate() {
                    for sub in subs(format, block) {
                        if sub.dl == 0.0 {
                            continue; // ggml keeps the search's levels where the stored scale is 0
                        }
                        for i in sub.values.clone().map(|i| b * QK_K + i) {
                            let level = ((y[i] + sub.ml) / sub.dl).round() as i32;
                            assert!((sub.lo..=sub.hi).contains(&level), "{format:?} value {i}: level {level}");
                            let at = |l: i32| sub.dl * l as f32 - sub.ml;
                            // Slack for the quantizer's f32 division and the dequantizer's rounding.
                            let slack = 1e-5 * sub.dl.abs() + 1e-6 * x[i].abs();
                            for other in [level - 1, level + 1].into_iter().filter(|l| (sub.lo..=sub.hi).contains(l)) {
                                let (mine, theirs) = ((x[i] - y[i]).abs(), (x[i] - at(other)).abs());
                                assert!(
                                    mine <= theirs + slack,
                                    "{format:?} kind {kind} scale {scale} value {i}: x {} got {} (level {level}), level {other} gives {}",
                                    x[i],
                                    y[i],
                                    at(other)
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The super-block scale is set from the largest sub-block scale, which therefore gets the top
/// code (63 for Q4_K/Q5_K, 15 for Q2_K, -32 for Q3_K, -128 for Q6_K), and likewise the largest
/// min; d and dmin are never negative where the format has mins.
#[test]
fn scale_codes_use_their_range() {
    let mut rng = Rng(9);
    for format in KQUANTS {
        for kind in 0..3 {
            let x = data(&mut rng, kind, 0.02);
            let q = quantize(format, &x);
            for (b, block) in q.chunks(format.block_bytes()).enumerate() {
                let (scales, mins, top) = codes(format, block);
                assert_eq!(scales.iter().max(), Some(&top), "{format:?} kind {kind} block {b}: scale codes {scales:?}");
                let dmin = match format {
                    Format::Q2_K => f16_at(block, 82),
                    Format::Q4_K | Format::Q5_K => f16_at(block, 2),
                    _ => continue,
                };
                let d = if format == Format::Q2_K { f16_at(block, 80) } else { f16_at(block, 0) };
                assert!(d > 0.0 && dmin >= 0.0, "{format:?} block {b}: d {d}, dmin {dmin}");
                if dmin > 0.0 {
                    assert_eq!(mins.iter().max(), Some(&top), "{format:?} kind {kind} block {b}: min codes {mins:?}");
                } else {
                    assert!(mins.iter().all(|&m| m == 0), "{format:?} block {b}: dmin 0 with min codes {mins:?}");
                }
            }
        }
    }
}

/// Values that are already on a block's grid should come back nearly unchanged: re-quantizing a
/// dequantized row moves it less than the first quantization did, and at least half the blocks
/// come back bit for bit (ggml's search is a heuristic, so it does not always find the very grid
/// it made).
#[test]
fn requantizing_is_a_near_fixed_point() {
    let mut rng = Rng(11);
    for format in KQUANTS {
        let (mut exact, mut total) = (0, 0);
        for kind in 0..3 {
            for scale in [0.02f32, 1.0] {
                let x = data(&mut rng, kind, scale);
                let y = dequantize(format, &quantize(format, &x));
                let y2 = dequantize(format, &quantize(format, &y));
                for (b, ((xb, yb), y2b)) in x.chunks(QK_K).zip(y.chunks(QK_K)).zip(y2.chunks(QK_K)).enumerate() {
                    let (first, second) = (rms(xb, yb), rms(yb, y2b));
                    assert!(
                        second <= first,
                        "{format:?} kind {kind} block {b}: second pass moved {second:e}, first {first:e}"
                    );
                    exact += (yb == y2b) as usize;
                    total += 1;
                }
            }
        }
        assert!(exact * 2 >= total, "{format:?}: only {exact} of {total} blocks are fixed points");
    }
}

#[test]
fn zero_and_non_finite_input() {
    for format in KQUANTS {
        let q = quantize(format, &[0.0; QK_K]);
        assert!(dequantize(format, &q).iter().all(|&v| v == 0.0), "{format:?}: zeros");
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX] {
            let mut x: Vec<f32> = (0..QK_K).map(|i| (i as f32 * 0.37).sin()).collect();
            x[5] = bad;
            x[200] = -bad;
            let q = quantize(format, &x); // any bytes, no panic
            dequantize(format, &q);
        }
    }
}

#[test]
#[should_panic(expected = "k-quant quantize")]
fn row_length_must_be_whole_blocks() {
    let mut dst = vec![0u8; 144];
    kquant::quantize_row_q4_k(&[0.0; 255], &mut dst);
}
