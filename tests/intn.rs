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
        Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
            let n = ((1u32 << f.scheme.bits()) - 1) as f32;
            f16_at(block, 0) * (0.5 + n * 2f32.powi(-10)) + ulp
        }
        Scheme::Nf4 => f16_at(block, 0) * (half_gap + 2f32.powi(-10)) + ulp,
        Scheme::Nf4Dq => {
            let gx = &x[g * f.group.size()..(g + 1) * f.group.size()];
            let a = gx.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = f16_at(block, 0);
            // The stored scale is within D/2 of a (plus D's own f16 rounding at c = 255).
            a * half_gap + d * (0.5 + 255.0 * 2f32.powi(-10)) + ulp
        }
    }
}

/// The packing against a plain reference: each value's bits set one at a time at bit b·i of the
/// data, the header as mod.rs states it (levels recomputed from the stated rules).
#[test]
fn packing_is_bit_exact_against_plain_reference() {
    for f in intn::ALL {
        let format = Format::Intn(f);
        let x = weights(4 * f.block_len(), 77 + f.type_id() as u64, 0.5);
        let mut got = Vec::new();
        quantize_row(format, &x, &mut got);
        let mut want = Vec::new();
        for xb in x.chunks(f.block_len()) {
            want.extend(reference_block(f, xb));
        }
        assert_eq!(got, want, "{}", f.name());
    }
}

/// One block by the rules of quantize.rs, packed bit by bit.
fn reference_block(f: Intn, x: &[f32]) -> Vec<u8> {
    let bits = f.scheme.bits();
    let mut header = [0u8; 4];
    let q: Vec<u32> = match f.scheme {
        Scheme::Int8 | Scheme::Int4 | Scheme::Int2 => {
            let n = (1u32 << bits) - 1;
            let lo = x.iter().copied().fold(0.0f32, f32::min);
            let hi = x.iter().copied().fold(0.0f32, f32::max);
            let d = f16::from_f32((hi - lo) / n as f32);
            let z = (-lo / d.to_f32()).round().clamp(0.0, n as f32);
            header[..2].copy_from_slice(&d.to_le_bytes());
            header[2] = z as u8;
            x.iter().map(|&v| ((v / d.to_f32()).round() + z).clamp(0.0, n as f32) as u32).collect()
        }
        Scheme::Nf4 => {
            let a = f16::from_f32(x.iter().fold(0.0f32, |m, v| m.max(v.abs())));
            header[..2].copy_from_slice(&a.to_le_bytes());
            x.iter().map(|&v| nearest(v / a.to_f32())).collect()
        }
        Scheme::Nf4Dq => {
            let g = f.group.size();
            let a: Vec<f32> = x.chunks(g).map(|c| c.iter().fold(0.0f32, |m, v| m.max(v.abs()))).collect();
            let d = f16::from_f32(a[0].max(a[1]) / 255.0);
            header[..2].copy_from_slice(&d.to_le_bytes());
            let c: Vec<u8> = a.iter().map(|&a| (a / d.to_f32()).round().clamp(1.0, 255.0) as u8).collect();
            header[2..].copy_from_slice(&c);
            x.iter().enumerate().map(|(i, &v)| nearest(v / (d.to_f32() * c[i / g] as f32))).collect()
        }
    };
    let mut data = vec![0u8; f.block_len() * bits / 8];
    for (i, &q) in q.iter().enumerate() {
        for j in 0..bits {
            if q >> j & 1 == 1 {
                let bit = bits * i + j;
                data[bit / 8] |= 1 << (bit % 8);
            }
        }
    }
    [header.to_vec(), data].concat()
}

/// The index of the level nearest v by full search (ties to the lower index).
fn nearest(v: f32) -> u32 {
    let mut best = 0;
    for (j, level) in NF4.iter().enumerate() {
        if (v - level).abs() < (v - NF4[best]).abs() {
            best = j;
        }
    }
    best as u32
}

/// One INT4 G32 block worked by hand: values -1, 0, 2, 3.5 then zeros. lo = -1, hi = 3.5,
/// d = 4.5/15 = 0.3 -> f16 0x34cd (0.30004883); z = round(1/0.30004883) = 3; q(-1) = -3 + 3 = 0,
/// q(0) = 3, q(2) = round(6.6656) + 3 = 10, q(3.5) = round(11.6648) + 3 = 15.
#[test]
fn int4_block_by_hand() {
    let f = Intn::new(Scheme::Int4, Group::G32);
    let mut x = vec![0.0f32; 32];
    x[..4].copy_from_slice(&[-1.0, 0.0, 2.0, 3.5]);
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
