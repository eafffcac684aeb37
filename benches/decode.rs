//! End-to-end prefill and decode on the reference model (SmolLM2-135M-Instruct Q4_1, fetched on
//! first use) on the CPU backend. These are slow, so samples are few; `ultra bench` gives the
//! llama-bench style figures with medians over runs, this gives criterion's statistics and
//! change detection. Run with `cargo bench --bench decode`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ultra::Cpu;
use ultra::bench::prompt_ids;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Runner};

const CONTEXT: usize = 1024;

fn runner(max_seqs: usize) -> Runner<Cpu> {
    let path = ultra::fetch::default_model().expect("the decode bench needs the default model");
    let gguf = Gguf::open(&path).unwrap();
    Runner::load(Cpu::new(), &gguf, CacheLayout::plain(max_seqs, CONTEXT), CONTEXT).unwrap()
}

/// One prompt of p tokens in one forward pass, from an empty cache.
fn prefill(c: &mut Criterion) {
    let mut r = runner(1);
    let mut group = c.benchmark_group("prefill");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for p in [128, 512] {
        let prompt = prompt_ids(p, r.config().vocab_size, 0);
        group.throughput(Throughput::Elements(p as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("p{p}")), |b| {
            b.iter(|| {
                let seq = r.cache.add_seq();
                r.forward_argmax(&Batch::sequence(seq, 0, &prompt, false)).unwrap();
                r.cache.remove_seq(seq).unwrap();
            })
        });
    }
    group.finish();
}

/// One decode step (one token per sequence, B sequences in one forward pass) after a prompt
/// of `ctx` tokens; the cache is cut back after each step, so every sample sees the same length.
fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    for (b_seqs, ctx) in [(1, 128), (1, 512), (8, 128)] {
        let mut r = runner(b_seqs);
        let seqs: Vec<usize> = (0..b_seqs)
            .map(|i| {
                let seq = r.cache.add_seq();
                let prompt = prompt_ids(ctx, r.config().vocab_size, i as u64 + 1);
                r.forward(&Batch::sequence(seq, 0, &prompt, false)).unwrap();
                seq
            })
            .collect();
        group.throughput(Throughput::Elements(b_seqs as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("b{b_seqs}_ctx{ctx}")), |b| {
            b.iter(|| {
                let mut batch = Batch::new();
                for &s in &seqs {
                    batch.push(42, s, ctx, true);
                }
                r.forward_argmax(&batch).unwrap();
                for &s in &seqs {
                    r.cache.truncate(s, ctx).unwrap();
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, prefill, decode);
criterion_main!(benches);
