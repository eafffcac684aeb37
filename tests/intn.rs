//! Ultra's group-wise formats (INT8/INT4/INT2, NF4, NF4_DQ; `ultra::quant::intn`): quantize ->
//! dequantize within each format's stated bound on random data, the packing bit-exact against a
//! plain bit-by-bit reference, and one block checked byte by byte by hand.

use half::f16;
use ultra::Format;
use ultra::quant::intn::{self, Group, Intn, NF4, Scheme};
use ultra::quant::{dequantize_row, quantize_row};

/// Roughly normal values (sum of four uniforms) of scale `scale`, with a few outliers.
fn weights(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..n)
        .map(|i| {
            let v = (uniform() + uniform() + uniform() + uniform()) * scale;
            if i % 97 == 13 { v * 8.0 } else { v }
        })
        .collect()
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Every format's round trip on random rows (k = 1536, several scales, plus a row with a group
/// of zeros and an all-positive group), each value within the bound quantize.rs states.
#[test]
fn round_trip_within_stated_bound() {
    let k = 1536;
    for f in intn::ALL {
        let format = Format::Intn(f);
        for (seed, scale) in [(1, 0.02f32), (2, 1.0), (3, 300.0)] {
            let mut x = weights(k, seed + f.type_id() as u64, scale);
            x[..f.group.size()].fill(0.0);
            for v in &mut x[2 * f.group.size()..3 * f.group.size()] {
                *v = v.abs() + scale;
            }
            let mut bytes = Vec::new();
            quantize_row(format, &x, &mut bytes);
            assert_eq!(bytes.len(), format.row_bytes(k).unwrap());
            let mut y = vec![0.0; k];
            dequantize_row(format, &bytes, &mut y);
            let mut sq = 0.0f64;
            for (block, (xb, yb)) in
                bytes.chunks_exact(f.block_bytes()).zip(x.chunks(f.block_len()).zip(y.chunks(f.block_len())))
            {
                for (g, (xg, yg)) in xb.chunks(f.group.size()).zip(yb.chunks(f.group.size())).enumerate() {
                    let bound = bound(f, block, xb, g);
                    for (a, b) in xg.iter().zip(yg) {
                        let bound =
                            if f.scheme == Scheme::Nf4Dq { bound } else { bound.min(a.abs() * 1.000_01 + 1e-30) };
                        assert!((a - b).abs() <= bound, "{} scale {scale}: {a} -> {b}, bound {bound}", f.name());
                        sq += ((a - b) as f64).powi(2);
                    }
                }
            }
            let rms = (sq / k as f64).sqrt() / scale as f64;
            eprintln!("{:12} scale {scale:6}: rms error / scale {rms:.4}", f.name());
        }
    }
}

/// The largest error quantize.rs allows in group g of a block (`x` the block's inputs).
fn bound(f: Intn, block: &[u8], x: &[f32], g: usize) -> f32 {
    let ulp = 1e-6 * x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    // Half the widest gap between NF4 levels (between -1 and the next).
    let half_gap = (NF4[1] - NF4[0]) / 2.0;
    match f.scheme {
        // 0 is always a level, so no value is further from its level than from 0 (the squared
        // error against min/max is int_search_never_worse_than_min_max's).
        Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => x.iter().fold(0.0f32, |m, v| m.max(v.abs())) + ulp,
        // Within the scale, half a gap; past it (a clipped outlier), no further than from 0.
        Scheme::Nf4 => {
            let s = f16_at(block, 0);
            let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            if amax <= s * (1.0 + 2f32.powi(-10)) { s * (half_gap + 2f32.powi(-10)) + ulp } else { amax + ulp }
        }
        Scheme::Nf4Dq => {
            let gx = &x[g * f.group.size()..(g + 1) * f.group.size()];
            let a = gx.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = f16_at(block, 0);
            // The stored scale is within D/2 of the searched one, at most a (plus D's own f16
            // rounding at c = 255); a clipped outlier is no further than from 0.
            (a * half_gap + d * (0.5 + 255.0 * 2f32.powi(-10))).max(a) + ulp
        }
    }
}

/// INT-b: the searched (d, z) never has a larger weighted squared error than min/max's (candidate 0).
#[test]
fn int_search_never_worse_than_min_max() {
    for f in intn::ALL.into_iter().filter(|f| matches!(f.scheme, Scheme::Int8 | Scheme::Int4 | Scheme::Int2)) {
        let x = weights(2048, 5 + f.type_id() as u64, 0.05);
        let mut bytes = Vec::new();
        quantize_row(Format::Intn(f), &x, &mut bytes);
        let mut y = vec![0.0; x.len()];
        dequantize_row(Format::Intn(f), &bytes, &mut y);
        let n = ((1u32 << f.scheme.bits()) - 1) as f32;
        let (mut searched, mut min_max) = (0.0f64, 0.0f64);
        for (xg, yg) in x.chunks(f.group.size()).zip(y.chunks(f.group.size())) {
            let av = (xg.iter().map(|v| v * v).sum::<f32>() / xg.len() as f32).sqrt() as f64;
            let (lo, hi) = xg.iter().fold((0.0f32, 0.0f32), |(l, h), &v| (l.min(v), h.max(v)));
            let d = f16::from_f32((hi - lo) / n).to_f32();
            let z = (-lo / d).round().clamp(0.0, n);
            for (&v, &w) in xg.iter().zip(yg) {
                let q = ((v / d).round() + z).clamp(0.0, n);
                let (e0, e) = ((d * (q - z) - v) as f64, (w - v) as f64);
                let w = av + v.abs() as f64;
                (min_max, searched) = (min_max + w * e0 * e0, searched + w * e * e);
            }
        }
        eprintln!("{:10}: rms {:.3e} searched, {:.3e} min/max", f.name(), searched.sqrt(), min_max.sqrt());
        assert!(searched <= min_max * (1.0 + 1e-5), "{}: {searched} > {min_max}", f.name());
    }
}

/// The packing against a plain reference: inputs exactly on a grid (a scale, a zero point and
/// levels that reach both ends, so every rule returns them), and the expected bytes built bit
/// by bit at bit b·i of the data with the header as mod.rs states it.
#[test]
fn packing_is_bit_exact_against_plain_reference() {
    let mut s = 12345u64;
    let mut next = move |n: u32| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as u32
    };
    for f in intn::ALL {
        let (bits, g) = (f.scheme.bits(), f.group.size());
        for _ in 0..8 {
            let mut header = [0u8; 4];
            let mut levels: Vec<u32> = (0..f.block_len()).map(|_| next(1 << bits)).collect();
            let x: Vec<f32> = match f.scheme {
                Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
                    let n = (1u32 << bits) - 1;
                    let (d, z) = (f16::from_f32(0.01 * (1 + next(100)) as f32), next(n + 1));
                    (levels[0], levels[1]) = (0, n);
                    header = [d.to_le_bytes()[0], d.to_le_bytes()[1], z as u8, 0];
                    levels.iter().map(|&q| d.to_f32() * (q as f32 - z as f32)).collect()
                }
                Scheme::Nf4 => {
                    let a = f16::from_f32(0.01 * (1 + next(100)) as f32);
                    levels[0] = if next(2) == 0 { 0 } else { 15 };
                    header[..2].copy_from_slice(&a.to_le_bytes());
                    levels.iter().map(|&q| a.to_f32() * NF4[q as usize]).collect()
                }
                Scheme::Nf4Dq => {
                    let d = f16::from_f32(0.0001 * (1 + next(100)) as f32);
                    let big = next(2) as usize;
                    let c = [if big == 0 { 255 } else { 1 + next(255) }, if big == 1 { 255 } else { 1 + next(255) }];
                    header = [d.to_le_bytes()[0], d.to_le_bytes()[1], c[0] as u8, c[1] as u8];
                    levels[0] = 0;
                    levels[g] = 15;
                    (0..f.block_len()).map(|i| d.to_f32() * c[i / g] as f32 * NF4[levels[i] as usize]).collect()
                }
            };
            let mut data = vec![0u8; f.block_len() * bits / 8];
            for (i, &q) in levels.iter().enumerate() {
                for j in 0..bits {
                    if q >> j & 1 == 1 {
                        data[(bits * i + j) / 8] |= 1 << ((bits * i + j) % 8);
                    }
                }
            }
            let mut got = Vec::new();
            quantize_row(Format::Intn(f), &x, &mut got);
            assert_eq!(got, [header.to_vec(), data].concat(), "{}", f.name());
        }
    }
}

/// One INT4 G32 block worked by hand: d = f16 0x34cd (0.30004883), z = 3 and values d·(q - z)
/// for q = 0, 3, 10, 15, then zeros (q = 3): on the grid, so min/max finds it with no error.
#[test]
fn int4_block_by_hand() {
    let f = Intn::new(Scheme::Int4, Group::G32);
    let d = f16::from_bits(0x34cd).to_f32();
    let mut x = vec![0.0f32; 32];
    x[..4].copy_from_slice(&[-3.0 * d, 0.0, 7.0 * d, 12.0 * d]);
    let mut bytes = Vec::new();
    quantize_row(Format::Intn(f), &x, &mut bytes);
    assert_eq!(bytes.len(), 20);
    assert_eq!(&bytes[..4], &[0xcd, 0x34, 3, 0]);
    // Values 0, 1 in byte 4 (low nibble first): 0 | 3 << 4; values 2, 3: 10 | 15 << 4; zeros are q = 3.
    assert_eq!(&bytes[4..8], &[0x30, 0xfa, 0x33, 0x33]);
    assert!(bytes[8..].iter().all(|&b| b == 0x33));
}

/// The GGUF type ids round-trip, sit outside ggml's range and are named.
#[test]
fn type_ids_and_names() {
    for f in intn::ALL {
        let format = Format::Intn(f);
        assert!(format.ggml_id() >= 1000);
        assert_eq!(Format::from_ggml_id(format.ggml_id(), "t").unwrap(), format);
        assert_eq!(Format::parse(format.name()), Some(format));
    }
    assert_eq!(Format::parse("int4_g128"), Some(Format::Intn(Intn::new(Scheme::Int4, Group::G128))));
}
