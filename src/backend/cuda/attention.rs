//! KV cache writes and paged attention on CUDA:
//! `cuda/{kv_write,attention,attention_batch,attention_prefill,copy_slots}.cu`.
//! Three attention kernels, chosen from the batch *shape* alone (n_tokens, `AttnBatch::decode`, n_kv_heads,
//! head_dim, the device):
//! - decode batches of at least BATCH_MIN_PAIRS (token, KV head) pairs, head_dim ≤ 128: `attention_batch_<HD>`,
//!   flash-decoding over BATCH_SPLITS blocks per token that score keys in chunks of 8 (one softmax step
//!   and one transposing reduction per chunk, not per key). With many sequences the GPU is full without
//!   many splits, and the per-key chain of the kernel below was what bounded a batched step.
//! - other decode batches and fewer than PREFILL_MIN_TOKENS tokens (speculative verify, small batches):
//!   `attention_<HD>`, flash-decoding, each token's keys split over N_SPLITS blocks, a key at a time;
//!   a block serves up to ATT_HEADS query heads of one KV head, which share its K/V loads (one head when
//!   that would leave SMs idle).
//!   In both, the last split block to finish merges the splits, the split count is a constant and a
//!   head's arithmetic does not depend on its block's other heads, so a token's bits do not depend on the
//!   batch or the block layout as long as the same kernel runs it.
//! - PREFILL_MIN_TOKENS or more otherwise (prefill chunks, mixed batches): `attention_prefill_<HD>`, a
//!   block per 64 (token, query head) rows of one KV head, K/V tiles staged once in shared memory for all
//!   of them. Flash-decoding rereads a sequence's whole prefix for every query token (O(n²·d) traffic);
//!   the tiled kernel reads it once per 64 rows.
//!
//! The cache is f32 or f16 (`CacheLayout::kv_dtype`): every kernel has an `_f16` twin that widens the
//! cached values exactly as it loads them and is otherwise the same code (a template), so an f16 cache
//! halves attention's K/V bytes and changes only the values' rounding.
//!
//! The choice never looks at seq or pos: a CUDA graph (graph.rs) captures a step's launches once per
//! batch shape and replays them with new seq/pos, so launches may depend on the shape only (the runner
//! keeps decode and mixed batches of one size apart); every kernel reads seq/pos on the device. A token's
//! bits depend on which kernel ran it (cuda does not promise batch invariance; README).

use cudarc::driver::{LaunchConfig, PushKernelArg, sys};

use super::context::{Cuda, grid_1d};
use super::driver::driver;
use super::kernels::{Module, entry};
use super::matmul::{self, VEC_MAX_M};
use super::planes::{Planes, Q8_BLOCK};
use crate::backend::{AttnBatch, AttnShape, DType, KvLayer, Tensor, Weight, check};
use crate::error::{Error, Result};

/// Key splits per (token, head): split s takes keys j ≡ s (mod N_SPLITS).
const N_SPLITS: usize = 16;
/// Query heads of one KV head per flash-decoding block (cuda/attention.cu's `attention`); few tokens
/// take one head per block (`attention_h1_<HD>`) instead.
const ATT_HEADS: usize = 4;
/// Below this many blocks per SM with ATT_HEADS heads per block, one head per block: a decode step at
/// batch 1 (llama-8b: 8 KV heads × 16 splits = 128 blocks) leaves most SMs idle otherwise, and the
/// K/V rows its heads would share are few (benches/notes/cuda.md, v12).
const ATT_MIN_BLOCKS_PER_SM: usize = 4;
/// Decode batches of at least this many (token, KV head) pairs run attention_batch (llama-8b: 17
/// sequences; SmolLM2, 3 KV heads: 43): with fewer, its BATCH_SPLITS blocks per pair leave SMs idle.
const BATCH_MIN_PAIRS: usize = 128;
/// attention_batch's key splits per (token, head): chunk c of 8 keys goes to split c mod BATCH_SPLITS.
const BATCH_SPLITS: usize = 4;
/// Batches of at least this many tokens run attention_prefill. Decode batches are usually smaller,
/// prefill chunks larger; below it the tiled kernel would have too few blocks to fill the GPU.
const PREFILL_MIN_TOKENS: usize = 64;
// attention_matmul's decode path is flash-decoding's: the GEMV's rows never reach the tiled kernel.
const _: () = assert!(VEC_MAX_M < PREFILL_MIN_TOKENS);
/// attention_prefill's tile: query rows and keys per block, threads (cuda/attention_prefill.cu).
const PREFILL_ROWS: usize = 64;
const PREFILL_KEYS: usize = 64;
const PREFILL_THREADS: u32 = 256;

pub fn kv_write(
    cuda: &Cuda,
    k: &Tensor<Cuda>,
    v: &Tensor<Cuda>,
    slot: &Tensor<Cuda>,
    cache: &mut KvLayer<Cuda>,
) -> Result<()> {
    check::kv_write(k, v, slot, cache)?;
    let kv_dim = cache.k.cols;
    let (n, kv_dim32, n_slots) = (k.len() as u64, kv_dim as u32, cache.k.rows as u32);
    if n == 0 {
        return Ok(());
    }
    let f = cuda.function(Module::KvWrite, by_cache(cache, entry::KV_WRITE, entry::KV_WRITE_F16))?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&k.buf.dev).arg(&v.buf.dev).arg(&slot.buf.dev).arg(&mut cache.k.buf.dev).arg(&mut cache.v.buf.dev);
    l.arg(&n).arg(&kv_dim32).arg(&n_slots);
    // SAFETY: arguments match cuda/kv_write.cu (the entry of the cache's dtype); k, v hold n floats,
    // slot n / kv_dim u32, the cache n_slots · kv_dim elements each (slots out of range are skipped).
    unsafe { l.launch(grid_1d(n, 256)?) }.map_err(driver)?;
    Ok(())
}

/// The f32 or the f16 entry, as the cache holds (check::attention and friends allowed only these two).
fn by_cache(cache: &KvLayer<Cuda>, f32_entry: &'static str, f16_entry: &'static str) -> &'static str {
    if cache.k.dtype == DType::F16 { f16_entry } else { f32_entry }
}

/// Profile row of one call: the query rows (the cost grows with the context, not shown).
pub fn label(q: &Tensor<Cuda>) -> (String, u64) {
    (format!("attention m{}", q.rows), 0)
}

pub fn attention(
    cuda: &Cuda,
    q: &Tensor<Cuda>,
    cache: &KvLayer<Cuda>,
    batch: &AttnBatch<Cuda>,
    shape: &AttnShape,
    dst: &mut Tensor<Cuda>,
) -> Result<()> {
    check::attention(q, cache, batch, shape, dst)?;
    let AttnShape { n_heads, head_dim, .. } = *shape;
    if head_dim > 256 {
        let detail = format!("head_dim {head_dim} (at most 256)");
        return Err(Error::Unsupported { op: "attention", backend: "cuda", detail });
    }
    let n_tokens = q.rows;
    if n_tokens * n_heads == 0 {
        return Ok(());
    }
    // A decode batch (one token per sequence) has nothing for the tiled kernel to share: each token
    // reads its own sequence's keys, so split-K's parallelism wins at every batch size.
    let tiled = if batch.decode { None } else { prefill_variant(cuda, n_tokens, head_dim, cache)? };
    match tiled {
        Some(variant) => attention_prefill(cuda, q, cache, batch, shape, variant, dst),
        None => {
            let plan = split_plan(cuda, q.rows, shape, cache, batch.decode);
            attention_split(cuda, q, cache, batch, shape, plan, dst, None)
        }
    }
}

/// attention into att, then dst = att · wᵀ (the output projection). For decode (m ≤ 8) with a
/// quantized w and heads of whole 32-value blocks, flash-decoding writes att's int8 planes as it
/// finishes each head and the GEMV reads them: no quantize launch between them. Otherwise
/// `attention`, then `matmul`.
#[allow(clippy::too_many_arguments)] // attention's five tensors and shape, and the matmul's weight and output
pub fn attention_matmul(
    cuda: &Cuda,
    q: &Tensor<Cuda>,
    cache: &KvLayer<Cuda>,
    batch: &AttnBatch<Cuda>,
    shape: &AttnShape,
    att: &mut Tensor<Cuda>,
    w: &Weight<Cuda>,
    dst: &mut Tensor<Cuda>,
) -> Result<()> {
    check::attention(q, cache, batch, shape, att)?;
    check::matmul(att, w, dst)?;
    let AttnShape { n_heads, head_dim, .. } = *shape;
    let fused = att.rows <= VEC_MAX_M
        && w.format.is_quantized()
        && head_dim.is_multiple_of(Q8_BLOCK)
        && head_dim <= 256
        && att.rows * n_heads > 0
        && w.rows > 0;
    if !fused {
        attention(cuda, q, cache, batch, shape, att)?;
        return matmul::matmul(cuda, att, w, dst);
    }
    let mut planes = Planes::hold(cuda, att.len())?;
    let plan = split_plan(cuda, q.rows, shape, cache, batch.decode);
    attention_split(cuda, q, cache, batch, shape, plan, att, Some(&mut planes))?;
    matmul::gemv_planes(cuda, att, w, dst, &mut planes)
}

/// The attention_prefill entry and its dynamic shared memory bytes for this shape, or None for
/// flash-decoding (too few tokens, or a device with less opt-in shared memory than the tile needs).
fn prefill_variant(
    cuda: &Cuda,
    n_tokens: usize,
    head_dim: usize,
    cache: &KvLayer<Cuda>,
) -> Result<Option<(&'static str, u32)>> {
    if n_tokens < PREFILL_MIN_TOKENS {
        return Ok(None);
    }
    let (entry, hd) = match head_dim {
        0..=64 => (by_cache(cache, entry::ATTENTION_PREFILL_64, entry::ATTENTION_PREFILL_64_F16), 64),
        65..=128 => (by_cache(cache, entry::ATTENTION_PREFILL_128, entry::ATTENTION_PREFILL_128_F16), 128),
        _ => (by_cache(cache, entry::ATTENTION_PREFILL_256, entry::ATTENTION_PREFILL_256_F16), 256),
    };
    // q and one K/V tile of [rows][hd + 4] floats, plus p [rows][keys + 1] (see the kernel's header);
    // the kernel's own static arrays (~0.8 KiB) are budgeted as 1 KiB.
    let smem = 4 * ((PREFILL_ROWS + PREFILL_KEYS) * (hd + 4) + PREFILL_ROWS * (PREFILL_KEYS + 1));
    let optin = cuda
        .ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(driver)?;
    Ok((smem + 1024 <= optin.max(0) as usize).then_some((entry, smem as u32)))
}

/// The tiled kernel for many tokens: grid (ceil(n_tokens · g / 64), n_kv_heads), no scratch.
fn attention_prefill(
    cuda: &Cuda,
    q: &Tensor<Cuda>,
    cache: &KvLayer<Cuda>,
    batch: &AttnBatch<Cuda>,
    shape: &AttnShape,
    (entry, smem): (&'static str, u32),
    dst: &mut Tensor<Cuda>,
) -> Result<()> {
    let AttnShape { n_heads, n_kv_heads, head_dim, scale, .. } = *shape;
    let window = window_arg(shape);
    let n_rows = q.rows * (n_heads / n_kv_heads);
    let f = cuda.function(Module::Attention, entry)?;
    // Above the default 48 KiB, dynamic shared memory must be allowed per function: raised on the
    // first launch (a host-side call, never recorded into a graph), only queried after that.
    let limit = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    if f.get_attribute(limit).map_err(driver)? < smem as i32 {
        f.set_attribute(limit, smem as i32).map_err(driver)?;
    }
    let u = |v: usize| v as u32;
    let grid = (u(n_rows.div_ceil(PREFILL_ROWS)), u(n_kv_heads), 1);
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (PREFILL_THREADS, 1, 1), shared_mem_bytes: smem };
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&q.buf.dev).arg(&cache.k.buf.dev).arg(&cache.v.buf.dev).arg(&batch.seq.buf.dev).arg(&batch.pos.buf.dev);
    l.arg(&batch.block_table.buf.dev).arg(&mut dst.buf.dev);
    let (nt, nh, nkv, hd) = (u(q.rows), u(n_heads), u(n_kv_heads), u(head_dim));
    let (bs, mb, n_seqs, n_slots) =
        (u(batch.block_size), u(batch.block_table.cols), u(batch.block_table.rows), u(cache.k.rows));
    l.arg(&nt).arg(&nh).arg(&nkv).arg(&hd).arg(&scale).arg(&bs).arg(&mb).arg(&n_seqs).arg(&n_slots).arg(&window);
    // SAFETY: arguments match attention_prefill_<HD> (or its _f16 twin, as the cache is) in
    // cuda/attention_prefill.cu, HD ≥ head_dim;
    // q, dst hold n_tokens · n_heads · head_dim floats, seq/pos n_tokens u32, block_table n_seqs ·
    // max_blocks u32 (check::attention rejected host-written bad indices; the kernel still skips seq ≥
    // n_seqs, keys past max_blocks · block_size and slots ≥ n_slots); smem is the tile's dynamic
    // shared memory, allowed above and within the device's opt-in limit (prefill_variant).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// A flash-decoding launch: the entry, its grid.x (blocks per split) and the split count.
struct SplitPlan {
    entry: &'static str,
    groups: usize,
    n_splits: usize,
}

/// Which flash-decoding kernel serves this batch shape (see the module doc).
fn split_plan(cuda: &Cuda, n_tokens: usize, shape: &AttnShape, cache: &KvLayer<Cuda>, decode: bool) -> SplitPlan {
    let AttnShape { n_heads, n_kv_heads, head_dim, .. } = *shape;
    // A block per (token, chunk of up to ATT_HEADS query heads of one KV head): the chunk shares K/V loads.
    let chunked = n_tokens * n_kv_heads * (n_heads / n_kv_heads).div_ceil(ATT_HEADS);
    if let Some(entry) = batch_entry(cache, head_dim).filter(|_| decode && n_tokens * n_kv_heads >= BATCH_MIN_PAIRS) {
        return SplitPlan { entry, groups: chunked, n_splits: BATCH_SPLITS };
    }
    // One head per block when chunks would leave the GPU idle.
    let one_head = chunked * N_SPLITS < cuda.sm_count as usize * ATT_MIN_BLOCKS_PER_SM;
    let groups = if one_head { n_tokens * n_heads } else { chunked };
    SplitPlan { entry: split_entry(cache, head_dim, one_head), groups, n_splits: N_SPLITS }
}

/// Flash-decoding: n_splits blocks per (token, head), the last one merging them; with `planes`
/// (held for dst's values, head_dim a multiple of 32) also dst's int8 planes.
#[allow(clippy::too_many_arguments)] // attention's arguments, its plan, and the planes
fn attention_split(
    cuda: &Cuda,
    q: &Tensor<Cuda>,
    cache: &KvLayer<Cuda>,
    batch: &AttnBatch<Cuda>,
    shape: &AttnShape,
    SplitPlan { entry: name, groups, n_splits }: SplitPlan,
    dst: &mut Tensor<Cuda>,
    planes: Option<&mut Planes>,
) -> Result<()> {
    let AttnShape { n_heads, n_kv_heads, head_dim, scale, .. } = *shape;
    let window = window_arg(shape);
    let pairs = q.rows * n_heads;
    let q8_total = dst.len() as u64; // the planes' values, if any
    let partial_bytes = if n_splits > 1 { pairs * n_splits * (2 + head_dim) * 4 } else { 0 };
    let mut scratch = cuda.scratch(&cuda.attn_scratch, partial_bytes)?;
    let partial = scratch.as_mut().expect("scratch allocated");
    // Split counters: zeroed when allocated, left zero by every launch (the merging block resets its own).
    let mut counters = cuda.scratch(&cuda.attn_counters, groups * 4)?;
    let done = counters.as_mut().expect("scratch allocated");

    let f = cuda.function(Module::Attention, name)?;
    let u = |v: usize| v as u32;
    let (nh, nkv, hd, bs, mb, ns) =
        (u(n_heads), u(n_kv_heads), u(head_dim), u(batch.block_size), u(batch.block_table.cols), u(n_splits));
    let cfg = LaunchConfig { grid_dim: (u(groups), ns, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&q.buf.dev).arg(&cache.k.buf.dev).arg(&cache.v.buf.dev).arg(&batch.seq.buf.dev).arg(&batch.pos.buf.dev);
    l.arg(&batch.block_table.buf.dev).arg(&mut dst.buf.dev).arg(&mut *partial).arg(&mut *done);
    let (n_seqs, n_slots) = (u(batch.block_table.rows), u(cache.k.rows));
    l.arg(&nh).arg(&nkv).arg(&hd).arg(&scale).arg(&bs).arg(&mb).arg(&ns).arg(&n_seqs).arg(&n_slots).arg(&window);
    let (xq, xds) = planes.map_or((0, 0), |p| p.pointers(cuda)); // null: no planes
    l.arg(&xq).arg(&xds).arg(&q8_total);
    // SAFETY: arguments match attention_<HD>, attention_h1_<HD> (cuda/attention.cu) and attention_batch_<HD>
    // (cuda/attention_batch.cu), or their _f16 twins, as the cache is, HD ≥ head_dim (split_entry,
    // batch_entry; ≤ 256 checked above); q, dst hold n_tokens · n_heads · head_dim floats,
    // seq/pos n_tokens u32, block_table n_seqs · max_blocks u32 (the model fills it with valid
    // blocks; check::attention rejected host-written bad indices, and the kernel still skips seq ≥ n_seqs
    // and slots ≥ n_slots), partial pairs · n_splits · (2 + head_dim) floats, done groups u32; xq and xds
    // null, or planes held for q8_total = dst's values with head_dim a multiple of 32 (attention_matmul).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// The flash-decoding entry for this cache dtype, head width (the smallest of 64, 128, 256 that
/// holds head_dim: registers per thread grow with it) and heads per block (one, or ATT_HEADS).
fn split_entry(cache: &KvLayer<Cuda>, head_dim: usize, one_head: bool) -> &'static str {
    use entry::*;
    let [f32s, f16s] = match (head_dim, one_head) {
        (0..=64, false) => [ATTENTION_64, ATTENTION_64_F16],
        (65..=128, false) => [ATTENTION_128, ATTENTION_128_F16],
        (_, false) => [ATTENTION_256, ATTENTION_256_F16],
        (0..=64, true) => [ATTENTION_H1_64, ATTENTION_H1_64_F16],
        (65..=128, true) => [ATTENTION_H1_128, ATTENTION_H1_128_F16],
        (_, true) => [ATTENTION_H1_256, ATTENTION_H1_256_F16],
    };
    by_cache(cache, f32s, f16s)
}

/// The attention_batch entry for this cache dtype and head width (64 or 128 ≥ head_dim), or None past
/// 128 dims (attention_<HD> serves them).
fn batch_entry(cache: &KvLayer<Cuda>, head_dim: usize) -> Option<&'static str> {
    use entry::*;
    let [f32s, f16s] = match head_dim {
        0..=64 => [ATTENTION_BATCH_64, ATTENTION_BATCH_64_F16],
        65..=128 => [ATTENTION_BATCH_128, ATTENTION_BATCH_128_F16],
        _ => return None,
    };
    Some(by_cache(cache, f32s, f16s))
}

/// The kernels' window argument: keys per window, 0 for none (check::attention rejected Some(0)
/// and windows past u32).
fn window_arg(shape: &AttnShape) -> u32 {
    shape.window.unwrap_or(0) as u32
}

pub fn copy_slots(cuda: &Cuda, cache: &mut KvLayer<Cuda>, src: usize, dst: usize, n: usize) -> Result<()> {
    check::copy_slots(cache, src, dst, n)?;
    let kv_dim = cache.k.cols;
    if n == 0 || src == dst {
        return Ok(());
    }
    // Overlapping ranges copy as memmove: pieces of at most |dst - src| slots (never overlapping
    // themselves), in the order that reads every slot before it is overwritten; the stream orders them.
    let piece = n.min(src.abs_diff(dst));
    let starts: Vec<usize> = (0..n).step_by(piece).collect();
    let f = cuda.function(Module::CopySlots, by_cache(cache, entry::COPY_SLOTS, entry::COPY_SLOTS_F16))?;
    for &i in
        if dst > src { Box::new(starts.iter().rev()) as Box<dyn Iterator<Item = _>> } else { Box::new(starts.iter()) }
    {
        let len = piece.min(n - i);
        let (s, d, count) = (((src + i) * kv_dim) as u64, ((dst + i) * kv_dim) as u64, (len * kv_dim) as u64);
        let mut l = cuda.stream.launch_builder(&f);
        l.arg(&mut cache.k.buf.dev).arg(&mut cache.v.buf.dev).arg(&s).arg(&d).arg(&count);
        // SAFETY: arguments match cuda/copy_slots.cu (the entry of the cache's dtype; offsets in
        // elements); both ranges lie inside n_slots · kv_dim elements (checked above) and one piece's
        // source and destination do not overlap.
        unsafe { l.launch(grid_1d(count, 256)?) }.map_err(driver)?;
    }
    Ok(())
}
