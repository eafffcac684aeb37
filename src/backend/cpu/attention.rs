//! Paged KV cache and causal attention on the CPU: kv_write, attention, copy_slots.
//!
//! attention: one rayon task per (token, head). Position j of the token's sequence is read at
//! slot block_table[seq][j / block_size] · block_size + j % block_size; scores are
//! scale · dot(q, k_j) (simd.rs order), combined by a softmax over j = 0..=pos in a fixed
//! order (see `Plan::head`). Nothing depends on the other tokens of the batch or on where the blocks live, so a
//! batch equals one-token calls and paged equals contiguous, bit for bit. Every index read from
//! a u32 tensor is checked.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::backend::{AttnBatch, AttnShape, KvLayer, Tensor, check};
use crate::error::{Error, Result};

use super::buffer::{f32s, f32s_mut, index, u32s};
use super::{Cpu, simd};

fn invalid(detail: String) -> Error {
    Error::InvalidArgument(detail)
}

/// See [`crate::Backend::kv_write`].   k, v: [n_tokens, kv_dim]; slot: u32 [n_tokens, 1];
/// cache.k, cache.v: [n_slots, kv_dim]. All slots are checked before anything is written.
pub fn kv_write(k: &Tensor<Cpu>, v: &Tensor<Cpu>, slot: &Tensor<Cpu>, cache: &mut KvLayer<Cpu>) -> Result<()> {
    let op = "kv_write";
    check::kv_write(k, v, slot, cache)?;
    let (kv_dim, n_slots) = (cache.k.cols, cache.k.rows);
    let (k, v, slot) = (f32s(op, k)?, f32s(op, v)?, u32s(op, slot)?);
    // check::kv_write read the same values.
    for &s in slot {
        index(op, "slot", s, n_slots)?;
    }
    for (cache_side, src) in [(&mut cache.k, k), (&mut cache.v, v)] {
        let dst = f32s_mut(op, cache_side)?;
        for (t, &s) in slot.iter().enumerate() {
            let s = s as usize;
            dst[s * kv_dim..(s + 1) * kv_dim].copy_from_slice(&src[t * kv_dim..(t + 1) * kv_dim]);
        }
    }
    Ok(())
}

/// See [`crate::Backend::copy_slots`]: slots [src, src + n) → [dst, dst + n) in k and v.
pub fn copy_slots(cache: &mut KvLayer<Cpu>, src: usize, dst: usize, n: usize) -> Result<()> {
    let op = "copy_slots";
    check::copy_slots(cache, src, dst, n)?;
    let kv_dim = cache.k.cols;
    for side in [&mut cache.k, &mut cache.v] {
        f32s_mut(op, side)?.copy_within(src * kv_dim..(src + n) * kv_dim, dst * kv_dim);
    }
    Ok(())
}

/// The cache geometry and batch tables, checked once.
struct Plan<'a> {
    q: &'a [f32],     // [n_tokens, n_heads · head_dim]
    k: &'a [f32],     // [n_slots, n_kv_heads · head_dim]
    v: &'a [f32],     // [n_slots, n_kv_heads · head_dim]
    seq: &'a [u32],   // [n_tokens]
    pos: &'a [u32],   // [n_tokens]
    table: &'a [u32], // [n_seqs, max_blocks]
    max_blocks: usize,
    block_size: usize,
    n_slots: usize,
    shape: AttnShape,
}

/// See [`crate::Backend::attention`].   q, dst: [n_tokens, n_heads · head_dim]
pub fn attention(
    q: &Tensor<Cpu>,
    cache: &KvLayer<Cpu>,
    batch: &AttnBatch<Cpu>,
    shape: &AttnShape,
    dst: &mut Tensor<Cpu>,
) -> Result<()> {
    let op = "attention";
    check::attention(q, cache, batch, shape, dst)?;
    let AttnShape { n_heads, head_dim, .. } = *shape;
    let n_slots = cache.k.rows;
    let plan = Plan {
        q: f32s(op, q)?,
        k: f32s(op, &cache.k)?,
        v: f32s(op, &cache.v)?,
        seq: u32s(op, &batch.seq)?,
        pos: u32s(op, &batch.pos)?,
        table: u32s(op, &batch.block_table)?,
        max_blocks: batch.block_table.cols,
        block_size: batch.block_size,
        n_slots,
        shape: *shape,
    };
    let n_seqs = batch.block_table.rows;
    // One task per (token, KV head) when that keeps every thread busy: the query heads of one KV
    // head then read its K/V rows from L1 in turn. Fewer tokens (decode): one task per head.
    let group = n_heads / shape.n_kv_heads;
    let heads_per_task = if dst.rows * shape.n_kv_heads >= 4 * rayon::current_num_threads() { group } else { 1 };
    f32s_mut(op, dst)?.par_chunks_mut(heads_per_task * head_dim).enumerate().try_for_each(|(i, out)| {
        let (t, h0) = (i * heads_per_task / n_heads, i * heads_per_task % n_heads);
        let seq = index(op, "seq", plan.seq[t], n_seqs)?;
        plan.heads(t, h0..h0 + heads_per_task, seq, out)
    })
}

thread_local! {
    /// Scores, then probabilities, of the current task's heads over their positions: [heads, n_pos].
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Offset of each position's K/V row (this head's columns) in the cache: [n_pos].
    static ROWS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Σ xs in 16 lanes (lane l takes elements 16c + l in order), lanes by the tree (l, l+8) →
/// (l, l+4) → (l, l+2) → (0, 1), then the tail in order: a fixed order that vectorizes.
fn lane_sum(xs: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let mut chunks = xs.chunks_exact(16);
    for c in &mut chunks {
        for l in 0..16 {
            acc[l] += c[l];
        }
    }
    let s8: [f32; 8] = std::array::from_fn(|l| acc[l] + acc[l + 8]);
    let s4: [f32; 4] = std::array::from_fn(|l| s8[l] + s8[l + 4]);
    let mut sum = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    for &x in chunks.remainder() {
        sum += x;
    }
    sum
}

/// Positions per turn of the heads in the scores (64 K rows: 16 KiB at head_dim 64, within L1).
const KEY_BLOCK: usize = 64;
/// Positions per turn of the heads in the weighted sum of V.
const VALUE_BLOCK: usize = 64;

/// dst[j] = scale · dot(q, k_row(block[j])): 16 keys per dot16, then 4 per dot4, then single
/// dots (all bit-identical to single dots, and dot is symmetric). Each group's results are scaled
/// and stored as one fixed-size chunk, so the multiply and the store vectorize.
fn scores_of<'a>(q: &[f32], block: &[usize], k_row: impl Fn(usize) -> &'a [f32], scale: f32, dst: &mut [f32]) {
    let (n16, n4) = (block.len() / 16 * 16, block.len() / 4 * 4);
    let (d16, rest) = dst.split_at_mut(n16);
    for (g, d) in block[..n16].chunks_exact(16).zip(d16.chunks_exact_mut(16)) {
        let v = simd::dot16(std::array::from_fn(|r| k_row(g[r])), q);
        for l in 0..16 {
            d[l] = scale * v[l];
        }
    }
    let (d4, rest) = rest.split_at_mut(n4 - n16);
    for (g, d) in block[n16..n4].chunks_exact(4).zip(d4.chunks_exact_mut(4)) {
        let v = simd::dot4([k_row(g[0]), k_row(g[1]), k_row(g[2]), k_row(g[3])], q);
        for l in 0..4 {
            d[l] = scale * v[l];
        }
    }
    for (s, &at) in rest.iter_mut().zip(&block[n4..]) {
        *s = scale * simd::dot(q, k_row(at));
    }
}

/// The largest of xs ignoring NaN (−∞ if none): 16 lanes, each kept by `s > m ? s : m` (it
/// vectorizes), then the lanes the same way. Max is exact, so this is the sequential fold's value
/// up to the sign of a zero maximum, which `s − max` and e^(s − max) do not show.
fn max_of(xs: &[f32]) -> f32 {
    let pick = |m: f32, s: f32| if s > m { s } else { m };
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = xs.chunks_exact(16);
    for c in &mut chunks {
        for l in 0..16 {
            lanes[l] = pick(lanes[l], c[l]);
        }
    }
    chunks.remainder().iter().fold(lanes.into_iter().fold(f32::NEG_INFINITY, pick), |m, &s| pick(m, s))
}

impl Plan<'_> {
    /// out = softmax-weighted sum of V over positions first_key(pos[t])..=pos[t] of `seq`, for
    /// each query head h of `heads` (all of one KV head) of token t, out holding them in order.
    ///
    /// Per head, two passes over the positions, in order: the scores s_j = scale · dot(q, k_j);
    /// then p_j = e^(s_j − max_j s_j) (the maximum gets exactly 1), denom = lane_sum(p), and
    /// out = (Σ_j p_j · v_j) / denom by fused axpys in order of j. A plain (not online) softmax:
    /// one exponential per position, vectorized, and no rescaling of `out`. The heads take turns
    /// per block of positions (their K/V rows still in L1); each head's arithmetic, and so its
    /// bits, are those of a head computed alone.
    fn heads(&self, t: usize, heads: std::ops::Range<usize>, seq: usize, out: &mut [f32]) -> Result<()> {
        let AttnShape { n_heads, n_kv_heads, head_dim, scale, .. } = self.shape;
        let kv_dim = n_kv_heads * head_dim;
        let kv_col = (heads.start / (n_heads / n_kv_heads)) * head_dim;
        let q = |h: usize| &self.q[(t * n_heads + h) * head_dim..][..head_dim];
        let end = self.pos[t] as usize + 1;
        let start = self.shape.first_key(end - 1);
        SCORES.with_borrow_mut(|scores| {
            ROWS.with_borrow_mut(|rows| {
                rows.clear();
                self.for_each_slot(seq, start, end, |slot| rows.push(slot * kv_dim + kv_col))?;
                let n = rows.len();
                if n == 0 {
                    // Unreachable (a token always sees itself), but chunks(0) below would panic.
                    out.fill(0.0);
                    return Ok(());
                }
                let k_row = |at: usize| &self.k[at..at + head_dim];
                scores.clear();
                scores.resize(heads.len() * n, 0.0);
                for (b, block) in rows.chunks(KEY_BLOCK).enumerate() {
                    for (i, h) in heads.clone().enumerate() {
                        let dst = &mut scores[i * n + b * KEY_BLOCK..][..block.len()];
                        scores_of(q(h), block, k_row, scale, dst);
                    }
                }
                for p in scores.chunks_mut(n) {
                    let max = max_of(p);
                    p.iter_mut().for_each(|s| *s -= max);
                }
                simd::exp_in_place(scores);
                out.fill(0.0);
                for at in (0..n).step_by(VALUE_BLOCK) {
                    let span = at..(at + VALUE_BLOCK).min(n);
                    simd::axpy_rows_heads(&scores[at..], n, self.v, &rows[span], out, head_dim);
                }
                for (p, o) in scores.chunks(n).zip(out.chunks_mut(head_dim)) {
                    let denom = lane_sum(p);
                    o.iter_mut().for_each(|o| *o /= denom);
                }
                Ok(())
            })
        })
    }

    /// Calls `f(slot)` for positions start..end of `seq` in order, each block checked once (blocks
    /// before `start`'s are never looked at).
    fn for_each_slot(&self, seq: usize, start: usize, end: usize, mut f: impl FnMut(usize)) -> Result<()> {
        let blocks = &self.table[seq * self.max_blocks..(seq + 1) * self.max_blocks];
        let bs = self.block_size;
        for b in start / bs..end.div_ceil(bs) {
            let (from, to) = (start.max(b * bs), end.min((b + 1) * bs));
            let base = self.block_base(seq, b, blocks, to - b * bs)?;
            (base + from - b * bs..base + to - b * bs).for_each(&mut f);
        }
        Ok(())
    }

    /// First slot of block b of `seq`, checked so that its first `count` slots exist.
    fn block_base(&self, seq: usize, b: usize, blocks: &[u32], count: usize) -> Result<usize> {
        let block = *blocks.get(b).ok_or_else(|| {
            invalid(format!("attention: sequence {seq} needs block {b}, but the block table has {}", blocks.len()))
        })?;
        (block as usize)
            .checked_mul(self.block_size)
            .filter(|base| base.checked_add(count).is_some_and(|end| end <= self.n_slots))
            .ok_or_else(|| {
                invalid(format!(
                    "attention: block {block} (entry {b} of sequence {seq}) lies outside the cache of {} slots",
                    self.n_slots
                ))
            })
    }
}
