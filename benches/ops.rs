//! Per-op CPU benches at the reference model's shapes (SmolLM2-135M: d_model 576, d_ff 1536,
//! 9 query heads and 3 KV heads of 64, vocabulary 49152), at decode (m = 1) and prefill
//! (m = 128, 512) sizes. Groups are named by the op's stem (`matmul`, `attention`, `rms_norm`,
//! `rope`, `silu_mul`) so a figure maps straight to `src/backend/cpu/<family>.rs`. Throughput is
//! in rows (tokens) per second. Run with `cargo bench --bench ops [-- FILTER]`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ultra::backend::{AttnBatch, AttnShape, DType, HostBytes, KvLayer, Rope, RopeStyle, Tensor, Weight};
use ultra::quant::quantize_row;
use ultra::{Backend, Cpu, Format};

const D_MODEL: usize = 576;
const D_FF: usize = 1536;
const VOCAB: usize = 49152;
const N_HEADS: usize = 9;
const N_KV_HEADS: usize = 3;
const HEAD_DIM: usize = 64;

/// Deterministic values in [-1, 1): the data does not change the work done.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn tensor(cpu: &Cpu, rows: usize, cols: usize, seed: u64) -> Tensor<Cpu> {
    let mut t = cpu.alloc(DType::F32, rows, cols).unwrap();
    cpu.write_f32(&mut t, &values(rows * cols, seed)).unwrap();
    t
}

fn u32_tensor(cpu: &Cpu, data: &[u32]) -> Tensor<Cpu> {
    let mut t = cpu.alloc(DType::U32, data.len(), 1).unwrap();
    cpu.write_u32(&mut t, data).unwrap();
    t
}

/// A [n, k] weight in `format`, quantized from random values with the reference quantizer.
fn weight(cpu: &Cpu, format: Format, n: usize, k: usize) -> Weight<Cpu> {
    let mut bytes = Vec::with_capacity(format.row_bytes(k).unwrap() * n);
    for (row, chunk) in values(n * k, 7).chunks(k).enumerate() {
        let scaled: Vec<f32> = chunk.iter().map(|v| v * 0.05 + row as f32 * 1e-6).collect();
        quantize_row(format, &scaled, &mut bytes);
    }
    cpu.upload_weight(format, n, k, HostBytes::from_vec(bytes)).unwrap()
}

fn matmul(c: &mut Criterion) {
    let cpu = Cpu::new();
    let mut group = c.benchmark_group("matmul");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    // (k, n): attention q/o, k/v, FFN gate/up, FFN down, and the output head (decode only:
    // prefill needs the last row's logits alone).
    let shapes =
        [(D_MODEL, D_MODEL), (D_MODEL, HEAD_DIM * N_KV_HEADS), (D_MODEL, D_FF), (D_FF, D_MODEL), (D_MODEL, VOCAB)];
    let formats =
        [Format::F32, Format::F16, Format::BF16, Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1, Format::Q8_0];
    for format in formats {
        for (k, n) in shapes {
            let w = weight(&cpu, format, n, k);
            for m in [1, 128, 512] {
                if n == VOCAB && m > 1 {
                    continue;
                }
                let x = tensor(&cpu, m, k, 1);
                let mut dst = cpu.alloc(DType::F32, m, n).unwrap();
                group.throughput(Throughput::Elements(m as u64));
                let id = BenchmarkId::new(format.name(), format!("m{m}_k{k}_n{n}"));
                group.bench_function(id, |b| b.iter(|| cpu.matmul(black_box(&x), &w, &mut dst).unwrap()));
            }
        }
    }
    group.finish();
}

/// Decode: one query against `ctx` cached positions; prefill: m causal queries at 0..m.
fn attention(c: &mut Criterion) {
    let cpu = Cpu::new();
    let mut group = c.benchmark_group("attention");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let kv_dim = N_KV_HEADS * HEAD_DIM;
    let shape = AttnShape {
        n_heads: N_HEADS,
        n_kv_heads: N_KV_HEADS,
        head_dim: HEAD_DIM,
        scale: 1.0 / (HEAD_DIM as f32).sqrt(),
        window: None,
    };
    let cases =
        [("decode", 1, 128), ("decode", 1, 512), ("decode", 1, 2048), ("prefill", 128, 128), ("prefill", 512, 512)];
    for (kind, m, ctx) in cases {
        let cache = KvLayer { k: tensor(&cpu, ctx, kv_dim, 2), v: tensor(&cpu, ctx, kv_dim, 3) };
        // The queries are the last m positions of a plain (one block) cache of ctx slots.
        let pos: Vec<u32> = (ctx - m..ctx).map(|p| p as u32).collect();
        let batch = AttnBatch {
            seq: u32_tensor(&cpu, &vec![0; m]),
            pos: u32_tensor(&cpu, &pos),
            slot: u32_tensor(&cpu, &pos),
            block_table: u32_tensor(&cpu, &[0]),
            block_size: ctx,
            decode: m == 1,
        };
        let q = tensor(&cpu, m, N_HEADS * HEAD_DIM, 4);
        let mut dst = cpu.alloc(DType::F32, m, N_HEADS * HEAD_DIM).unwrap();
        group.throughput(Throughput::Elements(m as u64));
        let id = BenchmarkId::new(kind, format!("m{m}_ctx{ctx}"));
        group
            .bench_function(id, |b| b.iter(|| cpu.attention(black_box(&q), &cache, &batch, &shape, &mut dst).unwrap()));
    }
    group.finish();
}

/// rms_norm, rope and silu_mul: the cheap ops, for completeness of the per-token budget.
fn pointwise(c: &mut Criterion) {
    let cpu = Cpu::new();
    let rope = Rope { head_dim: HEAD_DIM, n_rot: HEAD_DIM, theta: 100000.0, freq_scale: 1.0, style: RopeStyle::Normal };
    for m in [1, 128, 512] {
        let mut group = c.benchmark_group(format!("m{m}"));
        group.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
        group.throughput(Throughput::Elements(m as u64));
        let (x, gain) = (tensor(&cpu, m, D_MODEL, 5), tensor(&cpu, 1, D_MODEL, 6));
        let mut dst = cpu.alloc(DType::F32, m, D_MODEL).unwrap();
        group.bench_function(format!("rms_norm/d{D_MODEL}"), |b| {
            b.iter(|| cpu.rms_norm(black_box(&x), &gain, 1e-5, &mut dst).unwrap())
        });
        let mut q = tensor(&cpu, m, N_HEADS * HEAD_DIM, 7);
        let pos = u32_tensor(&cpu, &(0..m as u32).collect::<Vec<_>>());
        group.bench_function(format!("rope/heads{N_HEADS}x{HEAD_DIM}"), |b| {
            b.iter(|| cpu.rope(&mut q, &pos, &rope, None).unwrap())
        });
        let (gate, up) = (tensor(&cpu, m, D_FF, 8), tensor(&cpu, m, D_FF, 9));
        let mut hidden = cpu.alloc(DType::F32, m, D_FF).unwrap();
        group.bench_function(format!("silu_mul/d{D_FF}"), |b| {
            b.iter(|| cpu.silu_mul(black_box(&gate), &up, &mut hidden).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, matmul, attention, pointwise);
criterion_main!(benches);
