//! The GPTQ step on small random matrices: it reduces to round-to-nearest when H = I, and its
//! output error on correlated inputs is below round-to-nearest's.

use super::*;
use crate::backend::cpu::simd::noise;
use crate::quant::intn::{ALL, dequantize_block_row};

/// `n` values in [-1, 1) from the shared byte noise.
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    noise(n, seed).iter().map(|&b| b as f32 / 128.0 - 1.0).collect()
}

/// Σ over calibration rows t and output rows r of ((W − Q)·x_t)_r², in f64.
fn output_error(w: &[f32], q: &[f32], x: &[f32], cols: usize) -> f64 {
    let mut err = 0.0;
    for (wr, qr) in w.chunks_exact(cols).zip(q.chunks_exact(cols)) {
        for xt in x.chunks_exact(cols) {
            let e: f64 = wr.iter().zip(qr).zip(xt).map(|((&a, &b), &v)| (a as f64 - b as f64) * v as f64).sum();
            err += e * e;
        }
    }
    err
}

fn dequantized(f: Intn, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    dequantize_block_row(f, bytes, &mut v);
    v
}

#[test]
fn identity_hessian_is_round_to_nearest_bit_for_bit() {
    let (rows, cols) = (11, 256); // 11: a partial tile of rows
    let mut h = Hessian::new(cols);
    let eye: Vec<f32> = (0..cols * cols).map(|i| if i / cols == i % cols { 1.0 } else { 0.0 }).collect();
    h.add(&eye).unwrap();
    for f in ALL {
        let w = uniform(rows * cols, f.type_id() as u64);
        let mut rtn = vec![0u8; rows * cols / f.block_len() * f.block_bytes()];
        quantize_block_row(f, &w, &mut rtn);
        let got = quantize(f, &mut w.clone(), rows, cols, &h).unwrap();
        assert!(got == rtn, "{}: GPTQ with H = I differs from round-to-nearest", f.name());
    }
}

#[test]
fn lowers_the_output_error_below_round_to_nearest() {
    let (rows, cols, n) = (16, 256, 512);
    // Correlated inputs, as a layer's activations are: x = z·M with z and M uniform noise, plus a
    // few large input channels.
    let z = uniform(n * 32, 1);
    let m = uniform(32 * cols, 2);
    let mut x = vec![0f32; n * cols];
    for t in 0..n {
        for c in 0..cols {
            let boost = if c % 61 == 0 { 4.0 } else { 1.0 };
            x[t * cols + c] = boost * (0..32).map(|s| z[t * 32 + s] * m[s * cols + c]).sum::<f32>();
        }
    }
    let mut h = Hessian::new(cols);
    h.add(&x).unwrap();
    for f in ALL {
        let w = uniform(rows * cols, 100 + f.type_id() as u64);
        let mut rtn = vec![0u8; rows * cols / f.block_len() * f.block_bytes()];
        quantize_block_row(f, &w, &mut rtn);
        let gptq = quantize(f, &mut w.clone(), rows, cols, &h).unwrap();
        let (e_rtn, e_gptq) = (
            output_error(&w, &dequantized(f, &rtn, w.len()), &x, cols),
            output_error(&w, &dequantized(f, &gptq, w.len()), &x, cols),
        );
        assert!(e_gptq < 0.8 * e_rtn, "{}: GPTQ {e_gptq:.4e} vs RTN {e_rtn:.4e}", f.name());
    }
}

#[test]
fn dead_inputs_and_bad_shapes() {
    let (rows, cols) = (3, 64);
    let x = uniform(100 * cols, 7);
    // Input 5 never moves: its weights become 0 and the rest still quantize.
    let x: Vec<f32> = x.iter().enumerate().map(|(i, &v)| if i % cols == 5 { 0.0 } else { v }).collect();
    let mut h = Hessian::new(cols);
    h.add(&x).unwrap();
    let f = Intn::new(crate::quant::intn::Scheme::Int4, crate::quant::intn::Group::G32);
    let mut w = uniform(rows * cols, 8);
    let q = quantize(f, &mut w, rows, cols, &h).unwrap();
    assert!(dequantized(f, &q, rows * cols).iter().all(|v| v.is_finite()));
    assert!((0..rows).all(|r| w[r * cols + 5] == 0.0));
    assert!(quantize(f, &mut w, rows, 32, &h).is_err(), "hessian width != cols");
    let mut odd = uniform(rows * 48, 9);
    assert!(quantize(f, &mut odd, rows, 48, &Hessian::new(48)).is_err(), "cols not whole blocks");
}

#[test]
fn identity_hessian_with_importance_is_the_weighted_rounding_bit_for_bit() {
    let (rows, cols) = (5, 256);
    let mut h = Hessian::new(cols);
    let eye: Vec<f32> = (0..cols * cols).map(|i| if i / cols == i % cols { 1.0 } else { 0.0 }).collect();
    h.add(&eye).unwrap();
    let importance: Vec<f32> = uniform(cols, 3).iter().map(|v| 1.0 + v.abs() * 10.0).collect();
    for f in ALL {
        let w = uniform(rows * cols, 50 + f.type_id() as u64);
        let mut rtn = vec![0u8; rows * cols / f.block_len() * f.block_bytes()];
        let row_bytes = rtn.len() / rows;
        for (x, dst) in w.chunks(cols).zip(rtn.chunks_mut(row_bytes)) {
            quantize_block_row_weighted(f, x, &importance, dst);
        }
        let got = quantize_weighted(f, &mut w.clone(), rows, cols, &h, Some(&importance)).unwrap();
        assert!(got == rtn, "{}: GPTQ with H = I differs from the weighted rounding", f.name());
    }
}
