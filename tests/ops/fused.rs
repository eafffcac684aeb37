//! `matmuls` (several weights sharing x, one launch on cuda) against one `matmul` per weight,
//! bit for bit: the fused launch must compute every row exactly as the single one does.

use ultra::backend::{AttnBatch, DType, KvLayer, Rope, RopeStyle};
use ultra::{Backend, Format};

use crate::cases::AttnCase;
use crate::harness::{Rng, f32_tensor, random_weight, read_f32, u32_tensor, upload};
use crate::invariance::assert_bits_eq;
use crate::run::PagedAttention;

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

/// norm_matmuls == [add_]rms_norm then matmuls, bit for bit (x, xn and every output): wgpu's fused
/// decode path writes xn's int8 blocks in the norm's dispatch, exactly as quantizing xn afterwards
/// would (cuda: in the norm's launch). Mixed formats: the float part reads xn itself. Rows of 768
/// and 5,120 values (cuda quantizes a row wider than 2,048 in two passes of its block).
pub fn norm_matmuls<B: Backend>(b: &B) {
    for k in [768, 5120] {
        norm_matmuls_at(b, k); // whole blocks of Q4_K's 256
    }
}

fn norm_matmuls_at<B: Backend>(b: &B, k: usize) {
    let n = 45;
    let groups: [&[Format]; 5] = [
        &[Format::Q4_0; 3],
        &[Format::Q4_1; 2],
        &[Format::Q8_0, Format::Q8_0],
        &[Format::Q4_K],
        &[Format::Q4_0, Format::F16],
    ];
    for formats in groups {
        let mut rng = Rng::from_name(&format!("norm_matmuls {formats:?} k={k}"));
        let weights: Vec<_> = formats
            .iter()
            .enumerate()
            .map(|(i, &f)| upload(b, f, n + i, k, random_weight(&mut rng, f, n + i, k)).unwrap())
            .collect();
        let gain = f32_tensor(b, 1, k, &rng.fill(k, 0.5, 1.5)).unwrap();
        for (m, add) in [(1, true), (1, false), (5, true), (8, false), (9, true)] {
            let (x0, y) = (rng.fill(m * k, -3.0, 3.0), f32_tensor(b, m, k, &rng.fill(m * k, -3.0, 3.0)).unwrap());
            let y = add.then_some(&y);
            let run = |fused: bool| {
                let (mut x, mut xn) = (f32_tensor(b, m, k, &x0).unwrap(), b.alloc(DType::F32, m, k).unwrap());
                let mut outs: Vec<_> = weights.iter().map(|w| b.alloc(DType::F32, m, w.rows).unwrap()).collect();
                let mut parts: Vec<_> = weights.iter().zip(outs.iter_mut()).collect();
                if fused {
                    b.norm_matmuls(&mut x, y, &gain, 1e-5, &mut xn, &mut parts).unwrap();
                } else {
                    match y {
                        Some(y) => b.add_rms_norm(&mut x, y, &gain, 1e-5, &mut xn).unwrap(),
                        None => b.rms_norm(&x, &gain, 1e-5, &mut xn).unwrap(),
                    }
                    b.matmuls(&xn, &mut parts).unwrap();
                }
                [&x, &xn].into_iter().chain(&outs).map(|t| read_f32(b, t).unwrap()).collect::<Vec<_>>()
            };
            let (got, want) = (run(true), run(false));
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let name = ["x", "xn"].get(i).map_or_else(|| format!("dst {}", i - 2), |s| s.to_string());
                assert_bits_eq(&format!("norm_matmuls {formats:?} k={k} m={m} add={add}: {name}"), g, w);
            }
        }
    }
}

/// attention_matmul == attention then matmul, bit for bit (att and dst): wgpu's fused decode path
/// writes att's int8 blocks in attention's combine, exactly as quantizing att afterwards would.
/// Decode batches of 1, 3 and 8 sequences (GQA and not, 32-, 64- and 128-dim heads, several splits'
/// worth of keys), a batch past the GEMV (9 tokens), f32 and f16 caches.
pub fn attention_matmul<B: Backend>(b: &B) {
    // (seq_lens, new tokens per sequence, n_heads, n_kv_heads, head_dim)
    let shapes: [(&[usize], usize, usize, usize, usize); 4] = [
        (&[37], 1, 8, 2, 64),
        (&[300, 21, 5], 1, 4, 4, 128),
        (&[40, 33, 9, 70, 12, 3, 18, 25], 1, 8, 2, 32),
        (&[50], 9, 4, 1, 64),
    ];
    for (seq_lens, new, n_heads, n_kv_heads, head_dim) in shapes {
        for kv in [DType::F32, DType::F16, DType::Q8_0] {
            if kv != DType::F32 && b.alloc(kv, 1, n_kv_heads * head_dim).is_err() {
                continue; // a backend without f16 or q8_0 tensors (the cpu; cuda's q8_0)
            }
            for format in [Format::Q4_0, Format::Q8_0, Format::Q4_K, Format::F16] {
                let what = format!(
                    "attention_matmul {seq_lens:?}+{new} heads={n_heads}/{n_kv_heads} hd={head_dim} {kv:?} {}",
                    format.name()
                );
                let mut rng = Rng::from_name(&what);
                let case = AttnCase {
                    seq_lens: seq_lens.to_vec(),
                    new_tokens: vec![new; seq_lens.len()],
                    n_heads,
                    n_kv_heads,
                    head_dim,
                    block_size: 16,
                    window: None,
                    kv,
                };
                let setup = PagedAttention::new(&mut rng, &case);
                let all: Vec<usize> = (0..setup.tokens.len()).collect();
                let (q, cache, batch) = setup.inputs(b, &all).unwrap();
                let (m, k, n) = (q.rows, q.cols, 45);
                let w = upload(b, format, n, k, random_weight(&mut rng, format, n, k)).unwrap();
                let (mut att, mut dst) = (b.alloc(DType::F32, m, k).unwrap(), b.alloc(DType::F32, m, n).unwrap());
                b.attention_matmul(&q, &cache, &batch, &setup.shape(), &mut att, &w, &mut dst).unwrap();
                let (mut att2, mut dst2) = (b.alloc(DType::F32, m, k).unwrap(), b.alloc(DType::F32, m, n).unwrap());
                b.attention(&q, &cache, &batch, &setup.shape(), &mut att2).unwrap();
                b.matmul(&att2, &w, &mut dst2).unwrap();
                assert_bits_eq(&format!("{what}: att"), &read_f32(b, &att).unwrap(), &read_f32(b, &att2).unwrap());
                assert_bits_eq(&format!("{what}: dst"), &read_f32(b, &dst).unwrap(), &read_f32(b, &dst2).unwrap());
            }
        }
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

/// rope_kv_write == rope(q), rope(k), kv_write(k, v), bit for bit (q, k and both cache halves,
/// the slots it does not write included): GQA, both pairings, partial rotation in both, frequency
/// factors, one token and several, an f32, an f16 and a q8_0 cache. wgpu's f16 kernel takes
/// quads of k, so n_rot = 6 (not a multiple of 4) runs its three ops instead.
pub fn rope_kv_write<B: Backend>(b: &B) {
    // (n_tokens, n_heads, n_kv_heads, head_dim, n_rot, style, factors)
    let shapes = [
        (1, 9, 3, 64, 64, RopeStyle::Normal, false),
        (7, 8, 2, 128, 128, RopeStyle::Neox, true),
        (5, 4, 4, 32, 16, RopeStyle::Normal, true),
        (4, 6, 2, 64, 32, RopeStyle::Neox, true),
        (2, 4, 2, 16, 6, RopeStyle::Normal, false),
        (3, 2, 1, 6, 4, RopeStyle::Neox, false),
    ];
    for (n, heads, kv_heads, hd, n_rot, style, ff) in shapes {
        for kv in [DType::F32, DType::F16, DType::Q8_0] {
            let what =
                format!("rope_kv_write n={n} heads={heads}/{kv_heads} hd={hd} n_rot={n_rot} {style:?} ff={ff} {kv:?}");
            let mut rng = Rng::from_name(&what);
            let rope = Rope { head_dim: hd, n_rot, theta: 10000.0, freq_scale: 1.0, style };
            let (q0, k0, v0) = (
                rng.fill(n * heads * hd, -2.0, 2.0),
                rng.fill(n * kv_heads * hd, -2.0, 2.0),
                rng.fill(n * kv_heads * hd, -2.0, 2.0),
            );
            let n_slots = 2 * n + 3;
            let cache0 = rng.fill(n_slots * kv_heads * hd, -1.0, 1.0);
            let pos: Vec<u32> = (0..n as u32).map(|t| 3 * t + 100).collect();
            let slot: Vec<u32> = (0..n as u32).map(|t| (2 * t + 1) % n_slots as u32).collect();
            let factors = ff.then(|| f32_tensor(b, 1, n_rot / 2, &rng.fill(n_rot / 2, 1.0, 8.0)).unwrap());
            let batch = AttnBatch {
                seq: u32_tensor(b, n, 1, &vec![0; n]).unwrap(),
                pos: u32_tensor(b, n, 1, &pos).unwrap(),
                slot: u32_tensor(b, n, 1, &slot).unwrap(),
                block_table: u32_tensor(b, 1, 1, &[0]).unwrap(),
                block_size: n_slots,
                decode: n == 1,
            };
            let run = |fused: bool| {
                let mut q = f32_tensor(b, n, heads * hd, &q0).unwrap();
                let mut k = f32_tensor(b, n, kv_heads * hd, &k0).unwrap();
                let v = f32_tensor(b, n, kv_heads * hd, &v0).unwrap();
                let layer = |b: &B| {
                    let mut t = b.alloc(kv, n_slots, kv_heads * hd).unwrap();
                    b.write_f32(&mut t, &cache0).unwrap();
                    t
                };
                let mut cache = KvLayer { k: layer(b), v: layer(b) };
                if fused {
                    b.rope_kv_write(&mut q, &mut k, &v, &batch, &rope, factors.as_ref(), &mut cache).unwrap();
                } else {
                    b.rope(&mut q, &batch.pos, &rope, factors.as_ref()).unwrap();
                    b.rope(&mut k, &batch.pos, &rope, factors.as_ref()).unwrap();
                    b.kv_write(&k, &v, &batch.slot, &mut cache).unwrap();
                }
                [&q, &k, &cache.k, &cache.v].map(|t| read_f32(b, t).unwrap())
            };
            if kv != DType::F32 && b.alloc(kv, 1, kv_heads * hd).is_err() {
                continue; // a backend without f16 or q8_0 tensors (the cpu; cuda's q8_0; q8_0 of kv_dim 6)
            }
            let (got, want) = (run(true), run(false));
            for (name, (g, w)) in ["q", "k", "k cache", "v cache"].iter().zip(got.iter().zip(&want)) {
                assert_bits_eq(&format!("{what}: {name}"), g, w);
            }
        }
    }
}
