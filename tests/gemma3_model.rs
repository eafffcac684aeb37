//! Gemma 3 270M (the real Q4_K_M file) on the CPU: its sliding window must not depend on how a
//! sequence reached its position. The CPU backend is batch-invariant, so one 560-token batch, the
//! same tokens in two chunks across the window's edge (position 512) and then one at a time, and
//! the same through a paged cache, must give bit-identical logits at the last position.

mod common;

use ultra::Cpu;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Runner};

const LEN: usize = 560;

fn last_logits(g: &Gguf, layout: CacheLayout, tokens: &[u32], chunks: &[usize]) -> Vec<f32> {
    let mut runner = Runner::load(Cpu::exact(), g, layout, 1024).unwrap();
    let seq = runner.cache.add_seq();
    let mut at = 0;
    for &end in chunks.iter().chain(&(chunks.last().unwrap() + 1..=tokens.len()).collect::<Vec<_>>()) {
        runner.forward(&Batch::sequence(seq, at, &tokens[at..end], false)).unwrap();
        at = end;
    }
    assert_eq!(at, tokens.len());
    runner.cache.check().unwrap();
    runner.logits(0).to_vec()
}

#[test]
fn gemma3_logits_do_not_depend_on_chunking_or_paging_across_the_window_edge() {
    let g = Gguf::open(&common::gemma3_path()).unwrap();
    let window = g.get("gemma3.attention.sliding_window").and_then(|v| v.as_u64()).unwrap() as usize;
    assert!(LEN > window + 32, "the sequence must run past the window");
    // BOS, then a fixed spread of ids over the vocabulary.
    let tokens: Vec<u32> = std::iter::once(2).chain((1..LEN as u32).map(|i| (i * 7919) % 262_000 + 4)).collect();
    let whole = last_logits(&g, CacheLayout::plain(1, 1024), &tokens, &[LEN]);
    assert!(whole.iter().all(|v| v.is_finite()));
    let chunked = last_logits(&g, CacheLayout::plain(1, 1024), &tokens, &[256, 520]);
    assert!(whole == chunked, "one batch vs chunks across position {window} then single tokens");
    let paged = last_logits(&g, CacheLayout::paged(16, 64), &tokens, &[300, 530]);
    assert!(whole == paged, "plain vs paged cache");
}
