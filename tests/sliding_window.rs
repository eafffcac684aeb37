//! Sliding-window models and the paged cache: blocks that fall out of every layer's window are
//! given back, and attention (which never reads them) gives exactly the logits of a cache that
//! keeps everything. A model with a global layer keeps every block.

mod common;

use common::tiny::{TinySpec, tiny_gguf};
use ultra::Cpu;
use ultra::kv_cache::{CacheLayout, FREED};
use ultra::model::{Batch, Runner};

const WINDOW: usize = 5;
const PAGE: usize = 4;

/// Logits of every step of a prompt then one-token decodes, and the runner afterwards.
fn decode(n_layers: usize, layout: CacheLayout, tokens: &[u32]) -> (Vec<Vec<f32>>, Runner<Cpu>) {
    let spec = TinySpec { arch: "gemma3", n_layers, window: WINDOW, ..TinySpec::default() };
    let mut runner = Runner::load(Cpu::new(), &tiny_gguf(&spec), layout, 64).unwrap();
    let seq = runner.cache.add_seq();
    let mut logits = Vec::new();
    runner.forward(&Batch::sequence(seq, 0, &tokens[..3], false)).unwrap();
    logits.push(runner.logits(0).to_vec());
    for (pos, &t) in tokens.iter().enumerate().skip(3) {
        runner.forward(&Batch::sequence(seq, pos, &[t], true)).unwrap();
        logits.push(runner.logits(0).to_vec());
        runner.cache.check().unwrap();
    }
    (logits, runner)
}

fn tokens() -> Vec<u32> {
    (0..40u32).map(|i| (i * 7 + 3) % 16).collect()
}

#[test]
fn an_all_local_model_gives_back_blocks_outside_the_window_with_the_same_logits() {
    // 5 gemma3 layers: all sliding-window (the first global one would be layer 5).
    let (kept, _) = decode(5, CacheLayout::plain(1, 64), &tokens());
    let (paged, runner) = decode(5, CacheLayout::paged(PAGE, 16), &tokens());
    assert_eq!(kept, paged, "paged with blocks given back vs one contiguous block");
    let blocks = runner.cache.blocks(0).unwrap();
    // Blocks are given back when a sequence grows: the last token appended (at 39) sees 35..=39,
    // so blocks 0..8 (positions 0..32) are gone and blocks 8, 9 (32..40) remain.
    let live: Vec<u32> = blocks.iter().copied().filter(|&b| b != FREED).collect();
    assert_eq!(blocks.len(), 10);
    assert_eq!(live.len(), 2, "blocks {blocks:?}");
    assert!(blocks[..8].iter().all(|&b| b == FREED), "blocks {blocks:?}");
    assert_eq!(runner.cache.stats().freed, 8);
    // 40 tokens in pages of 4 would hold 10 pages; 2 stay in use.
    assert_eq!(runner.cache.blocks_in_use(), 2);
}

#[test]
fn a_model_with_a_global_layer_keeps_every_block() {
    // 7 gemma3 layers: layer 5 is global, so every position stays readable.
    let (kept, _) = decode(7, CacheLayout::plain(1, 64), &tokens());
    let (paged, runner) = decode(7, CacheLayout::paged(PAGE, 16), &tokens());
    assert_eq!(kept, paged);
    assert!(!runner.cache.blocks(0).unwrap().contains(&FREED));
    assert_eq!(runner.cache.stats().freed, 0);
    assert_eq!(runner.cache.blocks_in_use(), 10);
}

#[test]
fn cutting_back_into_given_back_blocks_is_an_error_and_removal_frees_the_rest() {
    let (_, mut runner) = decode(5, CacheLayout::paged(PAGE, 16), &tokens());
    let err = runner.cache.truncate(0, 10).unwrap_err().to_string();
    assert!(err.contains("blocks its window needs were given back"), "{err}");
    // Back to 38 positions (a speculative rollback): the window of position 38 is still there.
    runner.cache.truncate(0, 38).unwrap();
    runner.cache.remove_seq(0).unwrap();
    runner.cache.check().unwrap();
    assert_eq!(runner.cache.blocks_in_use(), 0);
}
