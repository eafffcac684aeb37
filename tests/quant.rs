//! Weight formats against the `gguf` Python package's golden blocks (tests/data/quant): our
//! dequantizer reproduces its floats to 1 ulp, our quantizer reproduces its bytes exactly, and
//! quantize→dequantize round trips stay within each format's error bound on random data.

mod common;

use std::path::PathBuf;

use common::rng::Rng;
use serde_json::Value as Json;
use ultra::Error;
use ultra::quant::{Format, dequantize_row, f32_to_bf16_bits, quantize_row};

/// `$ULTRA_REFS/quant/golden.json`, or the copy under tests/data.
fn golden() -> Json {
    let root = std::env::var_os("ULTRA_REFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")));
    let path = root.join("quant/golden.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden.json parses")
}

struct Case {
    rows: usize,
    cols: usize,
    source: Option<Vec<f32>>,
    bytes: Vec<u8>,
    dequant: Vec<f32>,
}

fn case(golden: &Json, name: &str) -> Case {
    let t = &golden["types"][name];
    let floats = |key: &str| -> Option<Vec<f32>> {
        t[key].as_array().map(|a| a.iter().map(|v| v.as_f64().expect("number") as f32).collect())
    };
    let hex = t["bytes_hex"].as_str().expect("bytes_hex");
    let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
    Case {
        rows: t["rows"].as_u64().expect("rows") as usize,
        cols: t["cols"].as_u64().expect("cols") as usize,
        source: floats("source_f32"),
        bytes,
        dequant: floats("dequant_f32").expect("dequant_f32"),
    }
}

/// Distance in units in the last place (0 for equal values, including both zeros).
fn ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| {
        let bits = x.to_bits() as i32;
        if bits < 0 { i32::MIN.wrapping_sub(bits) } else { bits }
    };
    key(a).abs_diff(key(b))
}

const GOLDEN_FORMATS: [Format; 7] =
    [Format::F16, Format::BF16, Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1, Format::Q8_0];

#[test]
fn dequantize_reproduces_golden_floats_to_one_ulp() {
    let golden = golden();
    for format in GOLDEN_FORMATS {
        let c = case(&golden, format.name());
        let row_bytes = format.row_bytes(c.cols).unwrap();
        assert_eq!(c.bytes.len(), c.rows * row_bytes, "{format:?} golden size");
        let mut out = vec![0f32; c.cols];
        for r in 0..c.rows {
            dequantize_row(format, &c.bytes[r * row_bytes..][..row_bytes], &mut out);
            for (i, (&got, &want)) in out.iter().zip(&c.dequant[r * c.cols..][..c.cols]).enumerate() {
                assert!(ulps(got, want) <= 1, "{format:?} row {r} col {i}: got {got:e}, golden {want:e}");
            }
        }
    }
}

#[test]
fn quantize_reproduces_golden_bytes() {
    let golden = golden();
    for format in GOLDEN_FORMATS {
        let c = case(&golden, format.name());
        let source = c.source.expect("source_f32 for a quantizable format");
        let mut bytes = Vec::new();
        for row in source.chunks_exact(c.cols) {
            quantize_row(format, row, &mut bytes);
        }
        if let Some(i) = bytes.iter().zip(&c.bytes).position(|(a, b)| a != b) {
            let block = i / format.block_bytes();
            panic!(
                "{format:?}: first differing byte {i} (block {block}): ours {:02x}, golden {:02x}",
                bytes[i], c.bytes[i]
            );
        }
        assert_eq!(bytes.len(), c.bytes.len(), "{format:?} length");
    }
}

#[test]
fn f32_is_an_exact_round_trip() {
    let golden = golden();
    let source = case(&golden, "F16").source.unwrap();
    let mut bytes = Vec::new();
    quantize_row(Format::F32, &source, &mut bytes);
    assert_eq!(bytes, source.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    let mut back = vec![0f32; source.len()];
    dequantize_row(Format::F32, &bytes, &mut back);
    assert!(back.iter().zip(&source).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn iq_formats_are_refused_by_name() {
    for (name, id) in [("IQ4_NL", 20), ("IQ4_XS", 23), ("IQ2_XXS", 16), ("Q8_K", 15)] {
        match Format::from_ggml_id(id, "blk.0.ffn_down.weight") {
            Err(err @ Error::UnsupportedTensorType { type_id, .. }) => {
                assert_eq!(type_id, id);
                let msg = err.to_string();
                assert!(msg.contains(name) && msg.contains("blk.0.ffn_down.weight"), "{msg}");
            }
            other => panic!("{name}: expected UnsupportedTensorType, got {other:?}"),
        }
    }
    // 1000 is INT8_G32 (tests/intn.rs); 999 and 1005 (a gap in our range) are nobody's.
    for id in [999, 1005] {
        assert!(Format::from_ggml_id(id, "t").unwrap_err().to_string().contains("unknown"));
    }
}

#[test]
fn format_geometry() {
    let expect = [
        (Format::F32, 0, 1, 4),
        (Format::F16, 1, 1, 2),
        (Format::BF16, 30, 1, 2),
        (Format::Q4_0, 2, 32, 18),
        (Format::Q4_1, 3, 32, 20),
        (Format::Q5_0, 6, 32, 22),
        (Format::Q5_1, 7, 32, 24),
        (Format::Q8_0, 8, 32, 34),
        (Format::Q2_K, 10, 256, 84),
        (Format::Q3_K, 11, 256, 110),
        (Format::Q4_K, 12, 256, 144),
        (Format::Q5_K, 13, 256, 176),
        (Format::Q6_K, 14, 256, 210),
    ];
    assert_eq!(expect.len(), Format::GGML.len(), "every ggml format listed (ours: tests/intn.rs)");
    for (format, id, block_len, block_bytes) in expect {
        assert_eq!((format.ggml_id(), format.block_len(), format.block_bytes()), (id, block_len, block_bytes));
        assert_eq!(Format::from_ggml_id(id, "t").unwrap(), format);
        assert_eq!(Format::parse(&format.name().to_lowercase()), Some(format));
        assert_eq!(format.is_quantized(), block_len > 1);
        assert_eq!(format.row_bytes(4096).unwrap(), 4096 / block_len * block_bytes);
        assert_eq!(ultra::gguf::ggml_type_geometry(id), Some((block_len as u64, block_bytes as u64)));
    }
    assert!(Format::Q4_0.row_bytes(33).is_err());
    let e = Format::Q4_K.row_bytes(4096 + 32).unwrap_err().to_string();
    assert!(e.contains("Q4_K") && e.contains("256"), "{e}");
    for format in Format::ALL {
        // Every block's fields lie inside the block and do not overlap.
        let mut covered = vec![false; format.block_bytes()];
        for f in format.fields() {
            assert!(f.start < f.end && f.end <= format.block_bytes(), "{format:?} {f:?}");
            for b in &mut covered[f.start..f.end] {
                assert!(!*b, "{format:?}: field {} overlaps", f.name);
                *b = true;
            }
        }
        assert!(covered.iter().all(|&b| b), "{format:?}: fields cover the block");
    }
    assert_eq!(Format::F32.row_bytes(3).unwrap(), 12);
    assert!(Format::Q8_0.row_bytes(usize::MAX / 32 * 32).is_err(), "overflow is an error");
    assert_eq!(Format::parse("q9_9"), None);
}

#[test]
fn bf16_rounds_to_nearest_even_and_quiets_nan() {
    assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
    assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80, "tie to even (down)");
    assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82, "tie to even (up)");
    assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8001)), 0x3f81);
    assert_eq!(f32_to_bf16_bits(f32::MAX), 0x7f80, "overflow rounds to infinity");
    assert_eq!(f32_to_bf16_bits(f32::INFINITY), 0x7f80);
    assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0, "signalling NaN is quieted");
    assert_eq!(f32_to_bf16_bits(f32::from_bits(0xff81_2345)), 0xffc1, "sign and payload kept");
}

/// The largest error a block of `format` may show, given the block's values.
fn block_bound(format: Format, x: &[f32]) -> f32 {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let (lo, hi) = x.iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    // Storing a scale s as f16 moves it by at most half an f16 ulp: 2^-11 relative for normal
    // values, 2^-25 absolute in the subnormal range. The error is that times the level.
    let f16_err = |s: f32| (s.abs() / 2048.0).max(1.0 / (1u32 << 25) as f32);
    match format {
        Format::F32 => 0.0,
        Format::F16 => f16_err(amax),
        Format::BF16 => amax / 256.0,
        // The level opposite the extreme value is clipped: error up to one step.
        Format::Q4_0 => amax / 8.0 + 8.0 * f16_err(amax / 8.0),
        Format::Q5_0 => amax / 16.0 + 16.0 * f16_err(amax / 16.0),
        Format::Q4_1 => 0.5 * (hi - lo) / 15.0 + 15.0 * f16_err((hi - lo) / 15.0) + f16_err(lo),
        Format::Q5_1 => 0.5 * (hi - lo) / 31.0 + 31.0 * f16_err((hi - lo) / 31.0) + f16_err(lo),
        Format::Q8_0 => 0.5 * amax / 127.0 + 127.0 * f16_err(amax / 127.0),
        Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K => {
            unreachable!("k-quants have their own bounds in tests/kquant.rs")
        }
        Format::Intn(_) => unreachable!("the group-wise formats have their own bounds in tests/intn.rs"),
    }
}

#[test]
fn round_trip_error_is_bounded() {
    let mut rng = Rng(42);
    // The k-quants' bounds are in tests/kquant.rs, the group-wise formats' in tests/intn.rs.
    for format in Format::GGML.into_iter().filter(|f| !f.is_kquant()) {
        for (trial, scale) in [1e-3f32, 0.02, 1.0, 300.0].into_iter().enumerate() {
            let cols = 1024;
            let mut x: Vec<f32> = (0..cols).map(|_| rng.uniform() * scale).collect();
            // Edge blocks: all zero, constant, one outlier.
            x[..32].fill(0.0);
            x[32..64].fill(scale * 0.5);
            x[64] = scale * 20.0;
            let mut q = Vec::new();
            quantize_row(format, &x, &mut q);
            assert_eq!(q.len(), format.row_bytes(cols).unwrap());
            let mut y = vec![0f32; cols];
            dequantize_row(format, &q, &mut y);
            let n = format.block_len().max(32);
            for (b, (xb, yb)) in x.chunks(n).zip(y.chunks(n)).enumerate() {
                let bound = block_bound(format, xb) * 1.0001 + f32::MIN_POSITIVE;
                let worst = xb.iter().zip(yb).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst <= bound, "{format:?} trial {trial} block {b}: error {worst:e} > bound {bound:e}");
            }
            if format.is_quantized() {
                assert!(y[..32].iter().all(|&v| v == 0.0), "{format:?}: zero block stays zero");
            }
        }
    }
}

#[test]
fn non_finite_input_does_not_panic() {
    for format in Format::ALL {
        let mut x = vec![1.0f32; 256];
        x[3] = f32::NAN;
        x[40] = f32::INFINITY;
        x[41] = f32::NEG_INFINITY;
        let mut q = Vec::new();
        quantize_row(format, &x, &mut q);
        let mut y = vec![0f32; 256];
        dequantize_row(format, &q, &mut y);
    }
}

/// ggml's quantizers transcribed naively (scalar, `f32::round`, branchy absmax), for checking
/// the vectorizable forms in src/quant/quantize.rs on data full of rounding ties.
fn naive_block(format: Format, x: &[f32]) -> Vec<u8> {
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    let inv = |d: f32| if d == 0.0 { 0.0 } else { 1.0 / d };
    let absmax_signed = |x: &[f32]| {
        let i = (0..x.len()).fold(0, |best, i| if x[i].abs() > x[best].abs() { i } else { best });
        x[i]
    };
    let (lo, hi) = x.iter().fold((f32::MAX, -f32::MAX), |(l, h), &v| (l.min(v), h.max(v)));
    let nibbles = |q: &[u32]| (0..16).map(|j| ((q[j] & 15) | ((q[j + 16] & 15) << 4)) as u8).collect::<Vec<_>>();
    let high = |q: &[u32]| (0..32).fold(0u32, |h, j| h | ((q[j] >> 4) << j)).to_le_bytes();
    let mut out = Vec::new();
    match format {
        Format::Q8_0 => {
            let d = x.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
            out.extend(f16(d));
            out.extend(x.iter().map(|&v| (v * inv(d)).round() as i8 as u8));
        }
        Format::Q4_0 | Format::Q5_0 => {
            let (levels, bias) = if format == Format::Q4_0 { (16.0, 8.5) } else { (32.0, 16.5) };
            let d = absmax_signed(x) / -(levels / 2.0);
            let q: Vec<u32> = x
                .iter()
                .map(|&v| ((v as f64 * inv(d) as f64 + bias) as f32).trunc().min(levels - 1.0) as u32)
                .collect();
            out.extend(f16(d));
            if format == Format::Q5_0 {
                out.extend(high(&q));
            }
            out.extend(nibbles(&q));
        }
        Format::Q4_1 | Format::Q5_1 => {
            let levels = if format == Format::Q4_1 { 15.0 } else { 31.0 };
            let d = (hi - lo) / levels;
            let q: Vec<u32> = x.iter().map(|&v| ((v - lo) * inv(d) + 0.5).trunc().min(levels) as u32).collect();
            out.extend(f16(d));
            out.extend(f16(lo));
            if format == Format::Q5_1 {
                out.extend(high(&q));
            }
            out.extend(nibbles(&q));
        }
        _ => unreachable!("block formats only"),
    }
    out
}

#[test]
fn quantizers_match_a_naive_transcription_on_ties() {
    let mut rng = Rng(7);
    for format in [Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1, Format::Q8_0] {
        for trial in 0..20_000 {
            // Half the blocks are multiples of a half-step (ties everywhere), half are random.
            let step = 0.25 * (1 + rng.next() % 8) as f32;
            let x: Vec<f32> = (0..32)
                .map(
                    |_| if trial % 2 == 0 { (rng.next() % 65) as f32 * step - 8.0 * step } else { rng.uniform() * 3.0 },
                )
                .collect();
            let mut ours = Vec::new();
            quantize_row(format, &x, &mut ours);
            assert_eq!(ours, naive_block(format, &x), "{format:?} trial {trial}: {x:?}");
        }
    }
}
