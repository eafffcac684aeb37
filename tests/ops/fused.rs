//! `matmuls` (several weights sharing x, one launch on cuda) against one `matmul` per weight,
//! bit for bit: the fused launch must compute every row exactly as the single one does.

use ultra::backend::DType;
use ultra::{Backend, Format};

use crate::harness::{Rng, f32_tensor, random_weight, read_f32, upload};
use crate::invariance::assert_bits_eq;

pub fn matmuls<B: Backend>(b: &B) {
    let k = 576;
    let groups: [&[Format]; 9] = [
        &[Format::F32; 3],
        &[Format::F16; 2],
        &[Format::Q4_0; 3],
        &[Format::Q4_1; 3],
        &[Format::Q5_0; 2],
        &[Format::Q5_1; 3],
        &[Format::Q8_0; 3],
        &[Format::Q4_0, Format::Q8_0, Format::Q4_0], // mixed formats: one matmul each
        &[Format::Q4_1],
    ];
    for formats in groups {
        let mut rng = Rng::from_name(&format!("matmuls {formats:?}"));
        let ns = [96, 37, 33];
        let weights: Vec<_> = formats
            .iter()
            .zip(ns)
            .map(|(&f, n)| upload(b, f, n, k, random_weight(&mut rng, f, n, k)).unwrap())
            .collect();
        // 40 and 100: the split launches of one tile row or two (cuda: one matmul_mma_parts32 / _parts launch);
        // 300: prefill's unsplit ones (one matmul_mma_parts_whole launch).
        for m in [1, 3, 8, 13, 40, 100, 300] {
            let x = f32_tensor(b, m, k, &rng.fill(m * k, -1.0, 1.0)).unwrap();
            let mut fused: Vec<_> = weights.iter().map(|w| b.alloc(DType::F32, m, w.rows).unwrap()).collect();
            let mut parts: Vec<_> = weights.iter().zip(fused.iter_mut()).collect();
            b.matmuls(&x, &mut parts).unwrap();
            for (w, got) in weights.iter().zip(&fused) {
                let mut want = b.alloc(DType::F32, m, w.rows).unwrap();
                b.matmul(&x, w, &mut want).unwrap();
                let what = format!("matmuls {formats:?} m={m} n={} vs matmul", w.rows);
                assert_bits_eq(&what, &read_f32(b, got).unwrap(), &read_f32(b, &want).unwrap());
            }
        }
    }
}

/// rms_norm then matmuls of its output (the decode pattern) == the same matmuls of a fresh copy of
/// the normed values: nothing a backend keeps between ops may change what a matmul computes.
pub fn norm_then_matmuls<B: Backend>(b: &B) {
    let (k, n) = (576, 45);
    for format in [Format::Q4_0, Format::Q4_1, Format::Q5_1, Format::Q8_0, Format::F16] {
        let mut rng = Rng::from_name(&format!("norm then matmuls {}", format.name()));
        let w = upload(b, format, n, k, random_weight(&mut rng, format, n, k)).unwrap();
        let w2 = upload(b, format, 2 * n, k, random_weight(&mut rng, format, 2 * n, k)).unwrap();
        let gain = f32_tensor(b, 1, k, &rng.fill(k, 0.5, 1.5)).unwrap();
        for m in [1, 5, 8] {
            let x = f32_tensor(b, m, k, &rng.fill(m * k, -3.0, 3.0)).unwrap();
            let mut normed = b.alloc(DType::F32, m, k).unwrap();
            b.rms_norm(&x, &gain, 1e-5, &mut normed).unwrap();
            let (mut got, mut got2) = (b.alloc(DType::F32, m, n).unwrap(), b.alloc(DType::F32, m, 2 * n).unwrap());
            b.matmuls(&normed, &mut [(&w, &mut got), (&w2, &mut got2)]).unwrap();
            let copy = f32_tensor(b, m, k, &read_f32(b, &normed).unwrap()).unwrap();
            for (weight, got) in [(&w, &got), (&w2, &got2)] {
                let mut want = b.alloc(DType::F32, m, weight.rows).unwrap();
                b.matmul(&copy, weight, &mut want).unwrap();
                let what = format!("rms_norm → matmuls {} m={m} n={}", format.name(), weight.rows);
                assert_bits_eq(&what, &read_f32(b, got).unwrap(), &read_f32(b, &want).unwrap());
            }
        }
    }
}

/// add_rms_norm == add_assign then rms_norm, bit for bit (x and dst both).
pub fn add_rms_norm<B: Backend>(b: &B) {
    for (rows, d) in [(1, 576), (3, 4096), (9, 100), (40, 64)] {
        let mut rng = Rng::from_name(&format!("add_rms_norm {rows}x{d}"));
        let (x0, y_host, gain_host) =
            (rng.fill(rows * d, -3.0, 3.0), rng.fill(rows * d, -3.0, 3.0), rng.fill(d, 0.5, 1.5));
        let (y, gain) = (f32_tensor(b, rows, d, &y_host).unwrap(), f32_tensor(b, 1, d, &gain_host).unwrap());
        let (mut x, mut dst) = (f32_tensor(b, rows, d, &x0).unwrap(), b.alloc(DType::F32, rows, d).unwrap());
        b.add_rms_norm(&mut x, &y, &gain, 1e-5, &mut dst).unwrap();
        let (mut x2, mut dst2) = (f32_tensor(b, rows, d, &x0).unwrap(), b.alloc(DType::F32, rows, d).unwrap());
        b.add_assign(&mut x2, &y).unwrap();
        b.rms_norm(&x2, &gain, 1e-5, &mut dst2).unwrap();
        let what = format!("add_rms_norm {rows}x{d}");
        assert_bits_eq(&format!("{what}: x"), &read_f32(b, &x).unwrap(), &read_f32(b, &x2).unwrap());
        assert_bits_eq(&format!("{what}: dst"), &read_f32(b, &dst).unwrap(), &read_f32(b, &dst2).unwrap());
    }
}

/// silu_mul_matmul == silu_mul then matmul, bit for bit (hidden and dst): cuda's fused decode
/// path writes the int8 planes while computing hidden, exactly as quantizing it afterwards would.
pub fn silu_mul_matmul<B: Backend>(b: &B) {
    let (k, n) = (1536, 40);
    for format in [Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q8_0, Format::F16] {
        let mut rng = Rng::from_name(&format!("silu_mul_matmul {}", format.name()));
        let w = upload(b, format, n, k, random_weight(&mut rng, format, n, k)).unwrap();
        for m in [1, 4, 8, 9] {
            let gate = f32_tensor(b, m, k, &rng.fill(m * k, -4.0, 4.0)).unwrap();
            let up = f32_tensor(b, m, k, &rng.fill(m * k, -2.0, 2.0)).unwrap();
            let (mut hidden, mut got) = (b.alloc(DType::F32, m, k).unwrap(), b.alloc(DType::F32, m, n).unwrap());
            b.silu_mul_matmul(&gate, &up, &w, &mut hidden, &mut got).unwrap();
            let (mut hidden2, mut want) = (b.alloc(DType::F32, m, k).unwrap(), b.alloc(DType::F32, m, n).unwrap());
            b.silu_mul(&gate, &up, &mut hidden2).unwrap();
            b.matmul(&hidden2, &w, &mut want).unwrap();
            let what = format!("silu_mul_matmul {} m={m}", format.name());
            assert_bits_eq(&format!("{what}: hidden"), &read_f32(b, &hidden).unwrap(), &read_f32(b, &hidden2).unwrap());
            assert_bits_eq(&format!("{what}: dst"), &read_f32(b, &got).unwrap(), &read_f32(b, &want).unwrap());
        }
    }
}
