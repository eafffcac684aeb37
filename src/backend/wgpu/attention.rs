//! KV cache writes, slot copies and paged attention. Attention is split-K flash decoding
//! (`shaders/attention.wgsl` + `shaders/attention_combine.wgsl`): each (token, head) is split
//! into chunks of positions so that single-token decode over a long cache still fills the GPU;
//! large batches (prefill) get one chunk per (token, head), the plain causal online softmax.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{AttnBatch, AttnShape, KvLayer, Tensor, expect_shape};
use crate::error::{Error, Result};

/// Positions per tile of the attention kernel (its workgroup size).
const TILE: usize = 64;
/// (token, head, chunk) workgroups to aim for when splitting.
const TARGET_GROUPS: usize = 2048;

pub fn kv_write(
    be: &Wgpu,
    k: &Tensor<Wgpu>,
    v: &Tensor<Wgpu>,
    slot: &Tensor<Wgpu>,
    cache: &mut KvLayer<Wgpu>,
) -> Result<()> {
    let (n_tokens, kv_dim) = (k.rows, k.cols);
    expect_shape("kv_write", v, n_tokens, kv_dim)?;
    expect_shape("kv_write", slot, n_tokens, 1)?;
    expect_shape("kv_write", &cache.v, cache.k.rows, kv_dim)?;
    expect_shape("kv_write", &cache.k, cache.k.rows, kv_dim)?;
    let n = k.len();
    let params = [n as u32, kv_dim as u32, cache.k.rows as u32];
    let bufs = [&k.buf, &v.buf, &slot.buf, &cache.k.buf, &cache.v.buf];
    be.ctx.dispatch(Variant::plain(Kernel::KvWrite), &bufs, &params, be.ctx.grid_1d(n))
}

pub fn copy_slots(be: &Wgpu, cache: &mut KvLayer<Wgpu>, src: usize, dst: usize, n: usize) -> Result<()> {
    let (n_slots, kv_dim) = (cache.k.rows, cache.k.cols);
    if src.max(dst) + n > n_slots {
        return Err(Error::InvalidArgument(format!("copy_slots: [{src}, {dst}) + {n} outside {n_slots} slots")));
    }
    // A buffer cannot be bound twice in one dispatch: copy through scratch (src → scratch → dst).
    let len = n * kv_dim;
    let scratch = be.ctx.scratch((len * 4) as u64)?;
    let v = Variant::plain(Kernel::CopySlots);
    for t in [&cache.k, &cache.v] {
        be.ctx.dispatch(v, &[&t.buf, &*scratch], &[len as u32, (src * kv_dim) as u32, 0], be.ctx.grid_1d(len))?;
        be.ctx.dispatch(v, &[&*scratch, &t.buf], &[len as u32, 0, (dst * kv_dim) as u32], be.ctx.grid_1d(len))?;
    }
    Ok(())
}

pub fn attention(
    be: &Wgpu,
    q: &Tensor<Wgpu>,
    cache: &KvLayer<Wgpu>,
    batch: &AttnBatch<Wgpu>,
    shape: &AttnShape,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    let (n_tokens, hd) = (q.rows, shape.head_dim);
    let unsupported = |detail: String| Error::Unsupported { op: "attention", backend: "wgpu", detail };
    if hd == 0 || hd > 256 {
        return Err(unsupported(format!("head_dim {hd} (at most 256)")));
    }
    if shape.n_kv_heads == 0 || shape.n_heads % shape.n_kv_heads != 0 {
        return Err(Error::InvalidArgument(format!("attention: {shape:?}")));
    }
    expect_shape("attention", q, n_tokens, shape.n_heads * hd)?;
    expect_shape("attention", dst, n_tokens, shape.n_heads * hd)?;
    expect_shape("attention", &cache.k, cache.k.rows, shape.n_kv_heads * hd)?;
    for t in [&batch.seq, &batch.pos] {
        expect_shape("attention", t, n_tokens, 1)?;
    }
    let max_blocks = batch.block_table.cols;
    let max_ctx = (max_blocks * batch.block_size).max(1);
    let tiles = max_ctx.div_ceil(TILE);
    let want = (TARGET_GROUPS / (n_tokens * shape.n_heads).max(1)).clamp(1, tiles);
    let chunk = tiles.div_ceil(want) * TILE;
    let n_chunks = max_ctx.div_ceil(chunk);
    let part = be.ctx.scratch((n_tokens * shape.n_heads * n_chunks * (hd + 2) * 4) as u64)?;
    let params = [
        shape.n_heads as u32,
        shape.n_kv_heads as u32,
        hd as u32,
        shape.scale.to_bits(),
        batch.block_size as u32,
        max_blocks as u32,
        chunk as u32,
        n_chunks as u32,
    ];
    let bufs = [&q.buf, &cache.k.buf, &cache.v.buf, &batch.seq.buf, &batch.pos.buf, &batch.block_table.buf, &*part];
    let groups = [n_chunks as u32, shape.n_heads as u32, n_tokens as u32];
    be.ctx.dispatch(Variant::plain(Kernel::Attention), &bufs, &params, groups)?;
    let params = [shape.n_heads as u32, hd as u32, n_chunks as u32];
    let groups = [shape.n_heads as u32, n_tokens as u32, 1];
    be.ctx.dispatch(Variant::plain(Kernel::AttentionCombine), &[&*part, &dst.buf], &params, groups)
}
