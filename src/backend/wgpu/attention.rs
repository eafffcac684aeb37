//! KV cache writes, slot copies and paged attention.
//!
//! Attention has two kernels with one arithmetic. Both cut a token's keys into fixed chunks of
//! CHUNK = 32 positions; per chunk and query row, `attention_chunk.wgsl` stages the K (then V)
//! rows in workgroup memory with coalesced vec4 loads and computes m = max score, p = e^(s - m),
//! l = Σp, o = Σp·V in a fixed order; the chunks are then folded in ascending order by
//! `attention_fold.wgsl`.
//! - Split-K (`attention.wgsl` + `attention_combine.wgsl`), for decode and other batches with few
//!   queries per sequence: one workgroup per (chunk, GQA group, token), all heads of the group
//!   sharing each staged K/V row; the combine folds the chunk partials. At context 520 that is 17
//!   chunks × n_kv_heads workgroups where the old 256-position chunks gave 3 × n_heads, each of
//!   which walked 256 keys serially. The partials scratch only spans chunks up to the batch's
//!   furthest position and is bounded by PART_BUDGET (beyond it the batch runs tiled).
//!   On GPUs, where batch invariance is not asked for, the first pass is `attention_direct.wgsl`
//!   instead: every K and V load of the chunk is issued at once, straight into registers (four
//!   threads per key for the scores, a thread per column and key group for o), so a chunk costs
//!   two memory round trips where staging 16 rows at a time through workgroup memory cost a
//!   dependent load per row per thread. Same partials, same combine; a different order of sums,
//!   hence not the tiled kernel's bits.
//! - Tiled (`attention_tiled.wgsl`), for prefill, chunked prefill and mixed batches: one workgroup
//!   per (tile of qt tokens, GQA group) walks the whole context, sharing each staged K/V row among
//!   its qt · hpw ≤ 16 query rows and folding in registers: no scratch. Tokens of a tile may belong
//!   to different sequences (a tile runs once per sequence among its tokens).
//!
//! An f16 cache (`--kv-type f16`) holds two halves per u32 word: `kv_write_f16` rounds to nearest
//! even in integer arithmetic (the host's bits on every driver), the attention kernels widen each
//! staged row with `unpack2x16float` (`kv_f16.wgsl` in place of `kv_f32.wgsl`) and compute as for
//! an f32 cache, and slot copies move words. A q8_0 cache (`--kv-type q8_0`) stores each slot's row
//! as int8 values then f16 block scales (`kv_q8.rs`): `kv_write_q8` quantizes a pair of 32-value
//! blocks per thread, `kv_q8.wgsl` widens each staged vec4 as q · d, and slot copies move words.
//!
//! Batch invariance (`Options::batch_invariant`, which keeps `attention_direct` off): the per-row chunk
//! arithmetic never depends on the other rows, the staging
//! split or the kernel, and the fold is the same function in both, so a token's output is
//! bit-identical whichever kernel and batch ran it (`invariance_attention` runs a batch tiled and
//! each token split-K). The plan below picks a kernel for speed only.

use super::Wgpu;
use super::context::{GpuBuffer, Job};
use super::kernels::{Kernel, Variant};
use crate::backend::{AttnBatch, AttnShape, DType, KvLayer, Tensor, check, kv_q8};
use crate::error::{Error, Result};

/// Key positions per chunk; must equal attention_fold.wgsl's CHUNK.
const CHUNK: usize = 32;
/// Query rows (token × head pairs) and staged-query vec4s per workgroup: attention.wgsl's QH, QV.
const SPLIT_ROWS: usize = 8;
const SPLIT_QV: usize = 256;
/// Query rows per workgroup of attention_direct.wgsl (its QH; staged queries as split-K's).
const DIRECT_ROWS: usize = 4;
/// The same for attention_tiled.wgsl, and its workgroup memory (qs, kv, sc, mx, nk, slots).
const TILED_ROWS: usize = 16;
const TILED_QV: usize = 512;
const TILED_SHARED_BYTES: u32 = ((512 + 1056) * 16 + (16 * 32 + 16 + 16 + 32) * 4) as u32;
/// Batches with at least this many tokens per sequence on average run tiled: each staged K/V row
/// then serves several queries, and there are enough tiles to fill the GPU.
const TILED_MIN_TOKENS: usize = 8;
/// Split-K partials larger than this run tiled instead (which needs no scratch): a 512-token
/// mixed batch of llama-8b at context 4096 would need ~1 GiB.
const PART_BUDGET: usize = 64 << 20;

pub fn kv_write(
    be: &Wgpu,
    k: &Tensor<Wgpu>,
    v: &Tensor<Wgpu>,
    slot: &Tensor<Wgpu>,
    cache: &mut KvLayer<Wgpu>,
) -> Result<()> {
    check::kv_write(k, v, slot, cache)?;
    let kv_dim = k.cols;
    let bufs = [&k.buf, &v.buf, &slot.buf, &cache.k.buf, &cache.v.buf];
    if cache.k.dtype == DType::F16 {
        // One thread per cache word: a pair of values, rounded to halves.
        let (pairs, kv_words) = (k.len() / 2, kv_words(cache));
        let params = [pairs as u32, kv_words as u32, cache.k.rows as u32];
        return be.ctx.dispatch(Variant::plain(Kernel::KvWriteF16), &bufs, &params, be.ctx.grid_1d(pairs));
    }
    if cache.k.dtype == DType::Q8_0 {
        // One thread per pair of 32-value blocks (one scale word).
        let pairs = kv_dim.div_ceil(2 * kv_q8::BLOCK);
        let n = k.rows * pairs;
        let params = [n as u32, pairs as u32, kv_dim as u32, cache.k.rows as u32, kv_words(cache) as u32];
        return be.ctx.dispatch(Variant::plain(Kernel::KvWriteQ8), &bufs, &params, be.ctx.grid_1d(n));
    }
    let n = k.len();
    let params = [n as u32, kv_dim as u32, cache.k.rows as u32];
    be.ctx.dispatch(Variant::plain(Kernel::KvWrite), &bufs, &params, be.ctx.grid_1d(n))
}

/// u32 words per cache slot: its row's bytes, which `alloc` keeps whole words (f16 rows of even
/// width, q8_0 rows of whole blocks).
fn kv_words(cache: &KvLayer<Wgpu>) -> usize {
    cache.k.dtype.row_bytes(cache.k.cols).unwrap_or(0) / 4
}

pub fn copy_slots(be: &Wgpu, cache: &mut KvLayer<Wgpu>, src: usize, dst: usize, n: usize) -> Result<()> {
    check::copy_slots(cache, src, dst, n)?;
    let words = kv_words(cache);
    // A buffer cannot be bound twice in one dispatch: copy through scratch (src → scratch → dst).
    let len = n * words;
    let scratch = be.ctx.scratch((len * 4) as u64)?;
    let (v, groups) = (Variant::plain(Kernel::CopySlots), be.ctx.grid_1d(len));
    let (from, to) = ([len as u32, (src * words) as u32, 0], [len as u32, 0, (dst * words) as u32]);
    let (k_out, k_in) = ([&cache.k.buf, &*scratch], [&*scratch, &cache.k.buf]);
    let (v_out, v_in) = ([&cache.v.buf, &*scratch], [&*scratch, &cache.v.buf]);
    be.ctx.dispatch_all(&[
        Job { v, bufs: &k_out, params: &from, groups },
        Job { v, bufs: &k_in, params: &to, groups },
        Job { v, bufs: &v_out, params: &from, groups },
        Job { v, bufs: &v_in, params: &to, groups },
    ])
}

pub fn attention(
    be: &Wgpu,
    q: &Tensor<Wgpu>,
    cache: &KvLayer<Wgpu>,
    batch: &AttnBatch<Wgpu>,
    shape: &AttnShape,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    attention_q8(be, q, cache, batch, shape, dst, None).map(drop)
}

/// `attention`; where `xq` is given (int8 blocks sized for dst, head_dim a multiple of 32) and the
/// batch runs split-K, the combine also writes dst's int8 blocks into it (`combine_out_q8.wgsl`).
/// Returns whether it did.
pub(super) fn attention_q8(
    be: &Wgpu,
    q: &Tensor<Wgpu>,
    cache: &KvLayer<Wgpu>,
    batch: &AttnBatch<Wgpu>,
    shape: &AttnShape,
    dst: &mut Tensor<Wgpu>,
    xq: Option<&GpuBuffer>,
) -> Result<bool> {
    check::attention(q, cache, batch, shape, dst)?;
    let (n_tokens, hd) = (q.rows, shape.head_dim);
    if hd > 256 || !hd.is_multiple_of(4) {
        let detail = format!("head_dim {hd} (a multiple of 4, at most 256)");
        return Err(Error::Unsupported { op: "attention", backend: "wgpu", detail });
    }
    if n_tokens == 0 {
        return Ok(false);
    }
    let plan = Plan::new(be, batch, shape, n_tokens);
    // 0 = no window (check::attention rejects Some(0) and windows past u32).
    let window = shape.window.unwrap_or(0) as u32;
    let group = shape.n_heads / shape.n_kv_heads;
    // attention_direct's head must be whole vec4 column classes (4 per key), its heads per workgroup ≤ 4.
    let direct = !plan.tiled && be.ctx.attn_direct && hd.is_multiple_of(16);
    let (rows, qv) = match (plan.tiled, direct) {
        (true, _) => (TILED_ROWS, TILED_QV),
        (false, true) => (DIRECT_ROWS, SPLIT_QV),
        (false, false) => (SPLIT_ROWS, SPLIT_QV),
    };
    let hpw = heads_per_workgroup(group, hd / 4, rows, qv);
    let qt = if plan.tiled { (rows / hpw).min(qv / (hpw * hd / 4)) } else { 1 };
    let params = [
        shape.n_heads as u32,
        shape.n_kv_heads as u32,
        hd as u32,
        shape.scale.to_bits(),
        batch.block_size as u32,
        batch.block_table.cols as u32,
        n_tokens as u32,
        hpw as u32,
        qt as u32,
        plan.n_chunks as u32,
        window,
    ];
    let inputs = [&q.buf, &cache.k.buf, &cache.v.buf, &batch.seq.buf, &batch.pos.buf, &batch.block_table.buf];
    let head_groups = (shape.n_heads / hpw) as u32;
    let kv = cache.k.dtype;
    if plan.tiled {
        let bufs = [inputs.as_slice(), &[&dst.buf]].concat();
        let groups = [n_tokens.div_ceil(qt) as u32, head_groups, 1];
        let v = Variant { kv, ..Variant::plain(Kernel::AttentionTiled) };
        return be.ctx.dispatch(v, &bufs, &params, groups).map(|()| false);
    }
    let part = be.ctx.scratch(plan.part_bytes as u64)?;
    let bufs = [inputs.as_slice(), &[&*part]].concat();
    let combine = [shape.n_heads as u32, hd as u32, plan.n_chunks as u32, window];
    be.ctx.dispatch_all(&[
        Job {
            v: split_pass(direct, kv, hpw, hd / 4),
            bufs: &bufs,
            params: &params,
            groups: [plan.n_chunks as u32, head_groups, n_tokens as u32],
        },
        Job {
            v: Variant { q8: xq.is_some(), ..Variant::plain(Kernel::AttentionCombine) },
            bufs: &[&*part, &batch.pos.buf, &dst.buf, xq.unwrap_or(&dst.buf)][..3 + xq.is_some() as usize],
            params: &combine,
            groups: [shape.n_heads as u32, n_tokens as u32, 1],
        },
    ])?;
    Ok(xq.is_some())
}

/// Split-K's first pass: `attention_direct` (K and V straight into registers) or `attention`
/// (staged through workgroup memory). Both write the same partials for the same combine.
fn split_pass(direct: bool, kv: DType, hpw: usize, hd4: usize) -> Variant {
    match direct {
        true => Variant { kv, heads: hpw as u32, hd4: hd4 as u32, ..Variant::plain(Kernel::AttentionDirect) },
        false => Variant { kv, ..Variant::plain(Kernel::Attention) },
    }
}

/// Which kernel runs a batch, and the split-K scratch it would need. The tiled kernel and the
/// staged split-K pass give the same bits, so this is only about speed (and the scratch bound);
/// `attention_direct`, which does not, never runs under batch invariance.
struct Plan {
    tiled: bool,
    /// Chunks per (token, head) in the split-K layout: up to the batch's furthest position.
    n_chunks: usize,
    part_bytes: usize,
}

impl Plan {
    fn new(be: &Wgpu, batch: &AttnBatch<Wgpu>, shape: &AttnShape, n_tokens: usize) -> Plan {
        let pos = batch.pos.buf.mirror.get();
        // Without a host copy of pos (written by a kernel), size for the whole block table.
        let ctx = pos.map_or(batch.block_table.cols * batch.block_size, |p| *p.iter().max().unwrap_or(&0) as usize + 1);
        let n_chunks = ctx.div_ceil(CHUNK).max(1);
        let part_bytes = n_tokens * shape.n_heads * n_chunks * (shape.head_dim + 4) * 4;
        let fits = be.ctx.limits.max_compute_workgroup_storage_size >= TILED_SHARED_BYTES;
        // Tokens per sequence, on average: prompts and chunked prefill bring many, decode one.
        let many_per_seq = batch.seq.buf.mirror.get().is_some_and(|s| {
            let mut seqs = s.to_vec();
            seqs.sort_unstable();
            seqs.dedup();
            n_tokens >= TILED_MIN_TOKENS * seqs.len()
        });
        Plan { tiled: fits && (many_per_seq || part_bytes > PART_BUDGET), n_chunks, part_bytes }
    }
}

/// The most heads of one GQA group (a divisor of `group`) that fit a workgroup's `rows` query rows
/// and `qv` vec4s of staged queries.
fn heads_per_workgroup(group: usize, hd4: usize, rows: usize, qv: usize) -> usize {
    (1..=group).rev().find(|&d| group.is_multiple_of(d) && d <= rows && d * hd4 <= qv).unwrap_or(1)
}
