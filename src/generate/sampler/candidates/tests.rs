//! The candidate path against the full row: for random rows (peaked, flat, tied, with −∞, NaN
//! and +∞) and sampler configs, `sample_top_k` on the CPU backend's `top_k` either returns the
//! token `sample` returns on the full row, with the same random stream, or falls back.

use super::super::*;
use crate::backend::cpu::Cpu;
use crate::backend::{Backend, DType, MAX_TOP_K};

/// The row's `Backend::top_k` output: (ids [k], vals [k + 1]).
fn top_k(row: &[f32], k: usize) -> (Vec<u32>, Vec<f32>) {
    let cpu = Cpu::new();
    let mut x = cpu.alloc(DType::F32, 1, row.len()).unwrap();
    cpu.write_f32(&mut x, row).unwrap();
    let (mut ids, mut vals) = (cpu.alloc(DType::U32, 1, k).unwrap(), cpu.alloc(DType::F32, 1, k + 1).unwrap());
    cpu.top_k(&x, &mut ids, &mut vals).unwrap();
    let (mut ids_host, mut vals_host) = (vec![0; k], vec![0.0; k + 1]);
    cpu.read_u32(&ids, &mut ids_host).unwrap();
    cpu.read_f32(&vals, &mut vals_host).unwrap();
    (ids_host, vals_host)
}

/// Samples `row` both ways `draws` times with equal seeds. Returns how many draws the candidates
/// decided; panics on any difference in token or random stream.
fn check_row(config: &SamplerConfig, row: &[f32], lse_shift: f32, draws: usize) -> usize {
    let (mut full, mut top) = (Sampler::new(config.clone()).unwrap(), Sampler::new(config.clone()).unwrap());
    let Some(k) = top.top_k_request(row.len()) else { return 0 };
    let (ids, mut vals) = top_k(row, k);
    vals[k] += lse_shift; // as far off as a GPU's f32 log-sum-exp may be
    let mut decided = 0;
    for draw in 0..draws {
        let expected = full.sample(row, &[]);
        let got = match top.sample_top_k(&ids, &vals, row.len()) {
            Some(token) => {
                decided += 1;
                token
            }
            None => top.sample(row, &[]),
        };
        assert_eq!(got, expected, "draw {draw} of {config:?} (k = {k}, lse shift {lse_shift})");
        assert_eq!(top.rng.s, full.rng.s, "random streams diverged at draw {draw} of {config:?}");
    }
    decided
}

/// Rows of `vocab` logits: Gaussian-ish at several scales, five-level ties, and non-finite values.
fn rows(vocab: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Xoshiro256::new(seed);
    let mut normal = |scale: f32| -> Vec<f32> {
        (0..vocab).map(|_| ((0..4).map(|_| rng.next_f64() as f32).sum::<f32>() - 2.0) * scale).collect()
    };
    let mut out: Vec<Vec<f32>> = [0.3, 2.0, 6.0, 20.0].iter().map(|&s| normal(s)).collect();
    out.push(normal(3.0).iter().map(|v| (v / 2.0).round()).collect());
    let mut odd = normal(4.0);
    for (i, v) in [f32::NEG_INFINITY, f32::NAN, f32::INFINITY, -0.0, f32::MAX].iter().cycle().take(40).enumerate() {
        odd[i * 37 % vocab] = *v;
    }
    out.push(odd);
    out
}

fn configs() -> Vec<SamplerConfig> {
    let mut out = Vec::new();
    for temperature in [0.7, 1.3] {
        let base = SamplerConfig { temperature, seed: 5, ..SamplerConfig::default() };
        for top_k in [1, 2, 40, 256] {
            out.push(SamplerConfig { top_k, ..base.clone() });
            out.push(SamplerConfig { top_k, top_p: 0.8, min_p: 0.05, ..base.clone() });
        }
        for (top_p, min_p) in [(0.0, 0.0), (0.5, 0.0), (0.9, 0.0), (0.99, 0.0), (1.0, 0.02), (1.0, 0.3), (0.95, 0.1)] {
            out.push(SamplerConfig { top_p, min_p, ..base.clone() });
        }
    }
    out
}

#[test]
fn candidates_give_the_full_rows_token_and_random_stream() {
    let (mut decided, mut total) = (0, 0);
    for (vocab, seed) in [(1000, 1), (3000, 2), (200, 3)] {
        for row in rows(vocab, seed) {
            for config in configs() {
                for shift in [0.0, 2e-5, -2e-5] {
                    decided += check_row(&config, &row, shift, 20);
                    total += 20;
                }
            }
        }
    }
    // Most configurations are decided by the candidates; the rest fell back, and agreed too.
    assert!(decided > total / 2 && decided < total, "{decided} of {total} draws decided by the candidates");
}

#[test]
fn top_k_request_asks_only_when_candidates_can_decide() {
    let sampling = SamplerConfig { temperature: 1.0, ..SamplerConfig::default() };
    let request = |c: SamplerConfig, vocab| Sampler::new(c).unwrap().top_k_request(vocab);
    assert_eq!(request(SamplerConfig { top_k: 40, ..sampling.clone() }, 1000), Some(40));
    assert_eq!(request(SamplerConfig { top_k: 40, ..sampling.clone() }, 10), Some(10));
    assert_eq!(request(SamplerConfig { top_p: 0.9, ..sampling.clone() }, 1000), Some(MAX_TOP_K));
    assert_eq!(request(SamplerConfig { min_p: 0.1, ..sampling.clone() }, 1000), Some(MAX_TOP_K));
    assert_eq!(request(sampling.clone(), 1000), None, "no truncation: every token may be drawn");
    assert_eq!(request(SamplerConfig { top_k: MAX_TOP_K + 1, ..sampling.clone() }, 1000), None);
    assert_eq!(request(SamplerConfig { top_k: 40, repeat_penalty: 1.1, ..sampling.clone() }, 1000), None);
    assert_eq!(request(SamplerConfig { top_k: 40, ..SamplerConfig::default() }, 1000), None, "greedy");
}

#[test]
fn falls_back_when_the_candidates_cannot_prove_the_kept_set() {
    let sampling = SamplerConfig { temperature: 1.0, seed: 9, ..SamplerConfig::default() };
    let flat: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 * 1e-3).collect();
    let decides = |config: SamplerConfig, row: &[f32]| {
        let mut sampler = Sampler::new(config).unwrap();
        let k = sampler.top_k_request(row.len()).unwrap();
        let (ids, vals) = top_k(row, k);
        let token = sampler.sample_top_k(&ids, &vals, row.len());
        // A fallback must leave the random stream untouched.
        if token.is_none() {
            assert_eq!(sampler.rng.s, Xoshiro256::new(9).s);
        }
        token.is_some()
    };
    // A flat row: the nucleus and the min-p set hold nearly every token, far more than 256.
    assert!(!decides(SamplerConfig { top_p: 0.9, ..sampling.clone() }, &flat));
    assert!(!decides(SamplerConfig { min_p: 0.5, ..sampling.clone() }, &flat));
    // Top-k alone never needs more than its candidates, however flat the row.
    assert!(decides(SamplerConfig { top_k: 100, top_p: 0.9, ..sampling.clone() }, &flat));
    // A peaked row: both cuts end well inside the candidates.
    let mut peaked = flat.clone();
    peaked[500] = 30.0;
    assert!(decides(SamplerConfig { top_p: 0.9, ..sampling.clone() }, &peaked));
    assert!(decides(SamplerConfig { min_p: 0.5, ..sampling.clone() }, &peaked));
    // Two equal tokens and nothing else: top-p 0.5 is reached exactly at the first, so any error
    // in the log-sum-exp could move the cut; the candidates must not guess.
    let mut two = vec![f32::NEG_INFINITY; 1000];
    (two[3], two[700]) = (0.0, 0.0);
    assert!(!decides(SamplerConfig { top_p: 0.5, ..sampling.clone() }, &two));
    assert!(decides(SamplerConfig { top_p: 0.4, ..sampling.clone() }, &two));
    // Nothing with any mass.
    assert!(!decides(SamplerConfig { top_p: 0.5, ..sampling }, &[f32::NAN; 1000]));
}
