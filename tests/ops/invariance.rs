//! Batch invariance, bit for bit: a row's result must not depend on the other rows of the call
//! (see `Backend`'s module docs). Each check runs a batch at once and then row by row.

use ultra::backend::DType;
use ultra::{Backend, Format};

use crate::cases::AttnCase;
use crate::harness::{Rng, f32_tensor, random_weight, read_f32, upload};
use crate::run::PagedAttention;

pub fn assert_bits_eq(what: &str, batched: &[f32], single: &[f32]) {
    assert_eq!(batched.len(), single.len(), "{what}: lengths differ");
    if let Some(i) = (0..batched.len()).find(|&i| batched[i].to_bits() != single[i].to_bits()) {
        panic!("{what}: element {i} differs: batched {:e}, one row at a time {:e}", batched[i], single[i]);
    }
}

/// matmul of m rows == m calls of one row == chunks of 3 and m - 3 rows (k-quants and the
/// group-wise formats: rows of 768, whole blocks; the latter skipped where upload refuses them).
pub fn matmul<B: Backend>(b: &B, m: usize) {
    let n = 37;
    let legacy = [Format::F32, Format::F16, Format::Q4_0, Format::Q4_1, Format::Q8_0];
    let kquants = [Format::Q2_K, Format::Q3_K, Format::Q4_K, Format::Q5_K, Format::Q6_K];
    let ours = ultra::quant::intn::ALL.map(Format::Intn);
    for format in legacy.into_iter().chain(kquants).chain(ours) {
        let k = if format.is_kquant() || matches!(format, Format::Intn(_)) { 768 } else { 576 };
        let mut rng = Rng::from_name(&format!("invariance matmul {}", format.name()));
        let x_host = rng.fill(m * k, -1.0, 1.0);
        let w = match upload(b, format, n, k, random_weight(&mut rng, format, n, k)) {
            Err(ultra::Error::Unsupported { .. }) if matches!(format, Format::Intn(_)) && b.name() != "cpu" => continue,
            w => w.unwrap(),
        };
        let run = |rows: std::ops::Range<usize>| {
            let x = f32_tensor(b, rows.len(), k, &x_host[rows.start * k..rows.end * k]).unwrap();
            let mut dst = b.alloc(DType::F32, rows.len(), n).unwrap();
            b.matmul(&x, &w, &mut dst).unwrap();
            read_f32(b, &dst).unwrap()
        };
        let batched = run(0..m);
        let single: Vec<f32> = (0..m).flat_map(|i| run(i..i + 1)).collect();
        assert_bits_eq(&format!("matmul {} m={m} vs m=1", format.name()), &batched, &single);
        let chunked = [run(0..3), run(3..m)].concat();
        assert_bits_eq(&format!("matmul {} m={m} vs 3 + {}", format.name(), m - 3), &batched, &chunked);
    }
}

/// rms_norm of 7 rows == 7 one-row calls.
pub fn rms_norm<B: Backend>(b: &B) {
    let (rows, d) = (7, 576);
    let mut rng = Rng::from_name("invariance rms_norm");
    let (x_host, gain_host) = (rng.fill(rows * d, -10.0, 10.0), rng.fill(d, 0.5, 1.5));
    let gain = f32_tensor(b, 1, d, &gain_host).unwrap();
    let run = |r: std::ops::Range<usize>| {
        let x = f32_tensor(b, r.len(), d, &x_host[r.start * d..r.end * d]).unwrap();
        let mut dst = b.alloc(DType::F32, r.len(), d).unwrap();
        b.rms_norm(&x, &gain, 1e-5, &mut dst).unwrap();
        read_f32(b, &dst).unwrap()
    };
    let single: Vec<f32> = (0..rows).flat_map(|i| run(i..i + 1)).collect();
    assert_bits_eq("rms_norm 7 rows vs 1", &run(0..rows), &single);
}

/// A causal batch == one call per token, and the same data under a different block layout gives
/// the same bits. Cases: two prompts plus a speculative-verify tail (wgpu: split-K); one prompt's
/// 37 tokens across chunk edges and a shuffled mix of prefill chunks and decodes (wgpu: tiled,
/// while single tokens run split-K, so the two kernels are checked against each other).
/// The serving mix also over an f16 and a q8_0 cache where the backend has them. Cases of more than
/// `max_tokens` tokens are left out (a backend may switch kernels there).
pub fn attention<B: Backend>(b: &B, max_tokens: usize) {
    let mixed = AttnCase {
        seq_lens: vec![40, 9, 70],
        new_tokens: vec![7, 9, 5],
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        block_size: 16,
        window: None,
        kv: DType::F32,
    };
    let one_prompt = AttnCase { seq_lens: vec![290], new_tokens: vec![37], ..mixed.clone() };
    let serving = AttnCase { seq_lens: vec![100, 1, 65, 33], new_tokens: vec![40, 1, 1, 33], ..mixed.clone() };
    // A window (33: not a multiple of the block or of wgpu's 32-key chunk) cuts each kernel's chunks alike.
    let windowed = AttnCase { window: Some(33), ..serving.clone() };
    // The f16 and q8_0 caches where the backend has them: each kernel widens the same stored values.
    let caches = [DType::F16, DType::Q8_0].into_iter().filter(|&kv| b.alloc(kv, 1, 3 * 64).is_ok());
    let stored: Vec<AttnCase> = caches.map(|kv| AttnCase { kv, ..serving.clone() }).collect();
    for case in [mixed, one_prompt, serving, windowed].into_iter().chain(stored) {
        if case.new_tokens.iter().sum::<usize>() <= max_tokens {
            attention_case(b, &case);
        }
    }
}

fn attention_case<B: Backend>(b: &B, case: &AttnCase) {
    let mut rng = Rng::from_name(&format!("invariance attention {:?}", case.seq_lens));
    let setup = PagedAttention::new(&mut rng, case);
    let all: Vec<usize> = (0..setup.tokens.len()).collect();
    let batched = setup.run(b, &all).unwrap();
    let single: Vec<f32> = all.iter().flat_map(|&t| setup.run(b, &[t]).unwrap()).collect();
    assert_bits_eq("attention batch vs one token at a time", &batched, &single);
    let relaid = setup.relayout(&mut rng);
    assert_bits_eq("attention under another block layout", &batched, &relaid.run(b, &all).unwrap());
}
