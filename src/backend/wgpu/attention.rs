//! KV cache writes, slot copies and paged attention. Attention is split-K flash decoding
//! (`shaders/attention.wgsl` + `shaders/attention_combine.wgsl`): each (token, head) is split
//! into chunks of positions so that single-token decode over a long cache still fills the GPU;
//! multi-token batches of one sequence (prefill, verify) run `attention_tiled.wgsl` instead, which
//! shares each staged K/V row among QUERY_TILE tokens. Both use the same fixed chunks and the
//! same per-query arithmetic, so a token's bits never depend on which kernel or batch ran it.

use super::Wgpu;
use super::context::Job;
use super::kernels::{Kernel, Variant};
use crate::backend::check;
use crate::backend::{AttnBatch, AttnShape, DType, KvLayer, Tensor, expect_shape};
use crate::error::{Error, Result};

/// Positions per chunk (a multiple of the kernel's 64-position tile). Fixed, so a token's
/// result depends only on its own keys: batch- and layout-invariant bit for bit.
const CHUNK: usize = 256;
/// Query tokens per workgroup of attention_tiled (its QT), and its largest head_dim.
const QUERY_TILE: usize = 4;
const TILED_MAX_HD: usize = 128;

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
    be.expect_dtypes("kv_write", &[(k, DType::F32), (v, DType::F32), (slot, DType::U32)])?;
    be.expect_below("kv_write", "slot", slot, cache.k.rows)?;
    let n = k.len();
    let params = [n as u32, kv_dim as u32, cache.k.rows as u32];
    let bufs = [&k.buf, &v.buf, &slot.buf, &cache.k.buf, &cache.v.buf];
    be.ctx.dispatch(Variant::plain(Kernel::KvWrite), &bufs, &params, be.ctx.grid_1d(n))
}

pub fn copy_slots(be: &Wgpu, cache: &mut KvLayer<Wgpu>, src: usize, dst: usize, n: usize) -> Result<()> {
    let (n_slots, kv_dim) = (cache.k.rows, cache.k.cols);
    if src.max(dst).checked_add(n).is_none_or(|end| end > n_slots) {
        return Err(Error::InvalidArgument(format!("copy_slots: [{src}, {dst}) + {n} outside {n_slots} slots")));
    }
    // A buffer cannot be bound twice in one dispatch: copy through scratch (src → scratch → dst).
    let len = n * kv_dim;
    let scratch = be.ctx.scratch((len * 4) as u64)?;
    let (v, groups) = (Variant::plain(Kernel::CopySlots), be.ctx.grid_1d(len));
    let (from, to) = ([len as u32, (src * kv_dim) as u32, 0], [len as u32, 0, (dst * kv_dim) as u32]);
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
    be.expect_dtypes("attention", &[(q, DType::F32), (&batch.seq, DType::U32), (&batch.pos, DType::U32)])?;
    check_batch(batch, cache.k.rows)?;
    let max_blocks = batch.block_table.cols;
    let max_ctx = (max_blocks * batch.block_size).max(1);
    let (chunk, n_chunks) = (CHUNK, max_ctx.div_ceil(CHUNK));
    let part = be.ctx.scratch((n_tokens * shape.n_heads * n_chunks * (hd + 2) * 4) as u64)?;
    // Tiled only when the host knows every token is in one sequence (one block-table row).
    let one_seq = batch.seq.buf.mirror.as_ref().is_some_and(|s| s.iter().all(|&x| x == s[0]));
    let tiled = n_tokens > 1 && hd <= TILED_MAX_HD && one_seq;
    let params = [
        shape.n_heads as u32,
        shape.n_kv_heads as u32,
        hd as u32,
        shape.scale.to_bits(),
        batch.block_size as u32,
        max_blocks as u32,
        chunk as u32,
        n_chunks as u32,
        n_tokens as u32,
    ];
    let bufs = [&q.buf, &cache.k.buf, &cache.v.buf, &batch.seq.buf, &batch.pos.buf, &batch.block_table.buf, &*part];
    let (kernel, groups) = if tiled {
        (Kernel::AttentionTiled, [n_chunks as u32, shape.n_heads as u32, n_tokens.div_ceil(QUERY_TILE) as u32])
    } else {
        (Kernel::Attention, [n_chunks as u32, shape.n_heads as u32, n_tokens as u32])
    };
    let combine = [shape.n_heads as u32, hd as u32, n_chunks as u32];
    be.ctx.dispatch_all(&[
        Job { v: Variant::plain(kernel), bufs: &bufs, params: &params, groups },
        Job {
            v: Variant::plain(Kernel::AttentionCombine),
            bufs: &[&*part, &dst.buf],
            params: &combine,
            groups: [shape.n_heads as u32, n_tokens as u32, 1],
        },
    ])
}

/// Checks the batch's indices on the host copies of its tensors (see `backend::check`).
fn check_batch(batch: &AttnBatch<Wgpu>, n_slots: usize) -> Result<()> {
    check::attention_batch(batch, n_slots, |b| b.mirror.as_deref())
}
