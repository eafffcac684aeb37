//! Paged KV cache and causal attention on the CPU: kv_write, attention, copy_slots.
//!
//! attention: one rayon task per (token, head). Position j of the token's sequence is read at
//! slot block_table[seq][j / block_size] · block_size + j % block_size; scores are
//! scale · dot(q, k_j) (simd.rs order), combined by an online softmax over j = 0..=pos in
//! order. Nothing depends on the other tokens of the batch or on where the blocks live, so a
//! batch equals one-token calls and paged equals contiguous, bit for bit. Every index read from
//! a u32 tensor is checked.

use rayon::prelude::*;

use crate::backend::{AttnBatch, AttnShape, KvLayer, Tensor, expect_shape};
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
    let (n_tokens, kv_dim, n_slots) = (k.rows, cache.k.cols, cache.k.rows);
    expect_shape(op, k, n_tokens, kv_dim)?;
    expect_shape(op, v, n_tokens, kv_dim)?;
    expect_shape(op, slot, n_tokens, 1)?;
    expect_shape(op, &cache.v, n_slots, kv_dim)?;
    let (k, v, slot) = (f32s(op, k)?, f32s(op, v)?, u32s(op, slot)?);
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
    let (n_slots, kv_dim) = (cache.k.rows, cache.k.cols);
    expect_shape(op, &cache.v, n_slots, kv_dim)?;
    let fits = |start: usize| start.checked_add(n).is_some_and(|end| end <= n_slots);
    if !fits(src) || !fits(dst) {
        return Err(invalid(format!("{op}: {n} slots from {src} to {dst} do not fit a cache of {n_slots}")));
    }
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
    let AttnShape { n_heads, n_kv_heads, head_dim, .. } = *shape;
    if n_heads == 0 || n_kv_heads == 0 || head_dim == 0 || !n_heads.is_multiple_of(n_kv_heads) || batch.block_size == 0
    {
        return Err(invalid(format!(
            "{op}: need n_heads a multiple of n_kv_heads and nonzero sizes; got n_heads {n_heads}, \
             n_kv_heads {n_kv_heads}, head_dim {head_dim}, block_size {}",
            batch.block_size
        )));
    }
    let (n_tokens, n_slots) = (q.rows, cache.k.rows);
    expect_shape(op, q, n_tokens, n_heads * head_dim)?;
    expect_shape(op, dst, n_tokens, n_heads * head_dim)?;
    expect_shape(op, &cache.k, n_slots, n_kv_heads * head_dim)?;
    expect_shape(op, &cache.v, n_slots, n_kv_heads * head_dim)?;
    expect_shape(op, &batch.seq, n_tokens, 1)?;
    expect_shape(op, &batch.pos, n_tokens, 1)?;
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
    f32s_mut(op, dst)?.par_chunks_mut(head_dim).enumerate().try_for_each(|(i, out)| {
        let (t, h) = (i / n_heads, i % n_heads);
        let seq = index(op, "seq", plan.seq[t], n_seqs)?;
        plan.head(t, h, seq, out)
    })
}

impl Plan<'_> {
    /// out = softmax-weighted sum of V over positions 0..=pos[t] of `seq`, for query head h of token t.
    fn head(&self, t: usize, h: usize, seq: usize, out: &mut [f32]) -> Result<()> {
        let AttnShape { n_heads, n_kv_heads, head_dim, scale } = self.shape;
        let kv_dim = n_kv_heads * head_dim;
        let kv_col = (h / (n_heads / n_kv_heads)) * head_dim;
        let q = &self.q[(t * n_heads + h) * head_dim..][..head_dim];
        let blocks = &self.table[seq * self.max_blocks..(seq + 1) * self.max_blocks];
        let n_pos = self.pos[t] as usize + 1;
        let (mut max, mut denom) = (f32::NEG_INFINITY, 0.0f32);
        out.fill(0.0);
        for (b, start) in (0..n_pos).step_by(self.block_size).enumerate() {
            let count = self.block_size.min(n_pos - start);
            let base = self.block_base(seq, b, blocks, count)?;
            for slot in base..base + count {
                let k = &self.k[slot * kv_dim + kv_col..][..head_dim];
                let v = &self.v[slot * kv_dim + kv_col..][..head_dim];
                let score = scale * simd::dot(q, k);
                if score > max {
                    // Rescale what was accumulated under the old maximum (e^-inf = 0 at the start).
                    let correction = (max - score).exp();
                    denom *= correction;
                    out.iter_mut().for_each(|o| *o *= correction);
                    max = score;
                }
                let p = (score - max).exp();
                denom += p;
                simd::axpy(p, v, out);
            }
        }
        out.iter_mut().for_each(|o| *o /= denom);
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
