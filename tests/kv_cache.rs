//! The paged KV cache's accounting: thousands of random admit/extend/truncate/finish/share
//! operations keep every invariant (each page referenced, free or cached exactly once; reference
//! counts equal the sequences' page lists), and nothing leaks when every sequence ends.

mod common;

use common::tiny::{Rng, TinySpec, tiny_gguf};
use ultra::Cpu;
use ultra::kv_cache::{CacheLayout, KvCache, SeqId};
use ultra::model::Config;

fn cache(layout: CacheLayout) -> (Cpu, KvCache<Cpu>) {
    let config = Config::from_gguf(&tiny_gguf(&TinySpec { n_layers: 1, ..TinySpec::default() })).unwrap();
    let cpu = Cpu::new();
    let cache = KvCache::new(&cpu, config.n_layers, config.kv_dim(), layout).unwrap();
    (cpu, cache)
}

#[test]
fn random_operations_keep_the_page_pool_consistent_and_leak_nothing() {
    for seed in 0..20u64 {
        let (cpu, mut cache) = cache(CacheLayout::paged(4, 48));
        let mut rng = Rng(seed);
        let mut live: Vec<SeqId> = Vec::new();
        // Prompts drawn from a few shared prefixes, so prefix sharing and copy-on-write happen.
        let prefixes: Vec<Vec<u32>> = (0..3).map(|p| (0..12).map(|i| (p * 100 + i) as u32).collect()).collect();
        for _ in 0..500 {
            match rng.next_u64() % 5 {
                0 if live.len() < 8 => {
                    let seq = cache.add_seq();
                    let mut prompt = prefixes[(rng.next_u64() % 3) as usize].clone();
                    prompt.extend((0..rng.next_u64() % 6).map(|_| (rng.next_u64() % 50) as u32));
                    let reused = cache.reuse_prefix(seq, &prompt).unwrap();
                    assert!(reused < prompt.len() && reused % 4 == 0);
                    if cache.append(&cpu, seq, &prompt[reused..]).is_ok() {
                        live.push(seq);
                    } else {
                        cache.remove_seq(seq).unwrap();
                    }
                }
                1 | 2 if !live.is_empty() => {
                    let seq = live[(rng.next_u64() % live.len() as u64) as usize];
                    let extra: Vec<u32> = (0..1 + rng.next_u64() % 5).map(|_| (rng.next_u64() % 50) as u32).collect();
                    let before = cache.seq_len(seq).unwrap();
                    match cache.append(&cpu, seq, &extra) {
                        Ok(()) => assert_eq!(cache.seq_len(seq).unwrap(), before + extra.len()),
                        Err(_) => {
                            assert_eq!(cache.seq_len(seq).unwrap(), before, "a failed append changed the sequence")
                        }
                    }
                }
                3 if !live.is_empty() => {
                    let seq = live[(rng.next_u64() % live.len() as u64) as usize];
                    let len = cache.seq_len(seq).unwrap();
                    let keep = (rng.next_u64() % (len as u64 + 1)) as usize;
                    cache.truncate(seq, keep).unwrap();
                    assert_eq!(cache.seq_len(seq).unwrap(), keep);
                }
                _ if !live.is_empty() => {
                    let i = (rng.next_u64() % live.len() as u64) as usize;
                    cache.remove_seq(live.swap_remove(i)).unwrap();
                }
                _ => {}
            }
            cache.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        for seq in live.drain(..) {
            cache.remove_seq(seq).unwrap();
        }
        cache.check().unwrap();
        assert_eq!(cache.blocks_in_use(), 0, "seed {seed}: pages leaked");
        assert_eq!(cache.free_blocks(), 48);
        let stats = cache.stats();
        assert!(
            stats.reused > 0 && stats.prefix_hits > 0,
            "seed {seed}: pages were neither reused nor shared: {stats:?}"
        );
    }
}

#[test]
fn a_shared_page_is_copied_before_it_is_written() {
    let (cpu, mut cache) = cache(CacheLayout::paged(4, 16));
    let a = cache.add_seq();
    cache.append(&cpu, a, &[1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
    let b = cache.add_seq();
    assert_eq!(cache.reuse_prefix(b, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).unwrap(), 8);
    assert_eq!(cache.blocks(a).unwrap()[..2], cache.blocks(b).unwrap()[..2]);
    // b rolls back into the second shared page and writes there: it must get its own copy.
    cache.truncate(b, 6).unwrap();
    cache.append(&cpu, b, &[60, 70]).unwrap();
    assert_eq!(cache.blocks(a).unwrap()[0], cache.blocks(b).unwrap()[0]);
    assert_ne!(cache.blocks(a).unwrap()[1], cache.blocks(b).unwrap()[1]);
    assert_eq!(cache.seq_tokens(a).unwrap(), &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    cache.check().unwrap();
}

#[test]
fn a_cached_page_survives_its_sequence_and_is_evicted_last_recently_used_first() {
    let (cpu, mut cache) = cache(CacheLayout::paged(4, 4));
    let a = cache.add_seq();
    cache.append(&cpu, a, &[1, 2, 3, 4, 5]).unwrap();
    cache.remove_seq(a).unwrap();
    assert_eq!(cache.blocks_in_use(), 0);
    let b = cache.add_seq();
    assert_eq!(cache.reuse_prefix(b, &[1, 2, 3, 4, 9]).unwrap(), 4, "the finished sequence's full page is reused");
    cache.remove_seq(b).unwrap();
    // Filling the whole pool evicts the cached page.
    let c = cache.add_seq();
    cache.append(&cpu, c, &(100..116).collect::<Vec<u32>>()).unwrap();
    cache.remove_seq(c).unwrap();
    let d = cache.add_seq();
    assert_eq!(cache.reuse_prefix(d, &[1, 2, 3, 4, 9]).unwrap(), 0, "evicted pages are not matched");
    cache.check().unwrap();
}

/// The cache's element type is checked where the cache is made: the cpu backend has no f16 or q8_0
/// tensors (the GPU backends' `--kv-type f16`, wgpu's `q8_0`) and says so; u32 values are no cache at all.
#[test]
fn a_cache_of_f16_or_q8_0_on_the_cpu_or_of_u32_is_refused_with_a_clear_error() {
    use ultra::backend::DType;
    let cpu = Cpu::new();
    let layout = CacheLayout::plain(2, 16);
    let made = |dtype| KvCache::new(&cpu, 1, 8, layout.with_kv_dtype(dtype)).err();
    assert!(
        matches!(made(DType::F16), Some(ultra::Error::Unsupported { backend: "cpu", .. })),
        "{:?}",
        made(DType::F16)
    );
    assert!(
        matches!(made(DType::Q8_0), Some(ultra::Error::Unsupported { backend: "cpu", .. })),
        "{:?}",
        made(DType::Q8_0)
    );
    assert!(matches!(made(DType::U32), Some(ultra::Error::InvalidArgument(_))), "{:?}", made(DType::U32));
    assert!(made(DType::F32).is_none());
}
