//! The fused ops' plain compositions: what `Backend`'s defaults run, and what a backend that
//! fuses an op runs when its fusion is switched off (cuda's `ULTRA_CUDA_FUSE`), so both paths
//! share one body.

use super::{AttnBatch, AttnShape, Backend, KvLayer, Rope, Tensor, Weight, check};
use crate::error::Result;

/// `add_rms_norm` (or `rms_norm` without `y`) into `xn`, then `matmuls` of `xn`.
pub fn norm_matmuls<B: Backend>(
    b: &B,
    x: &mut Tensor<B>,
    y: Option<&Tensor<B>>,
    gain: &Tensor<B>,
    eps: f32,
    xn: &mut Tensor<B>,
    parts: &mut [(&Weight<B>, &mut Tensor<B>)],
) -> Result<()> {
    check::norm(x, y, gain, xn)?; // add_rms_norm's own error, which rms_norm would not give
    match y {
        Some(y) => b.add_rms_norm(x, y, gain, eps, xn)?,
        None => b.rms_norm(x, gain, eps, xn)?,
    }
    b.matmuls(xn, parts)
}

/// `rope` of q and of k, then `kv_write` of the rotated k and of v at the batch's slots.
#[allow(clippy::too_many_arguments)] // the trait op's arguments, passed through
pub fn rope_kv_write<B: Backend>(
    b: &B,
    q: &mut Tensor<B>,
    k: &mut Tensor<B>,
    v: &Tensor<B>,
    batch: &AttnBatch<B>,
    rope: &Rope,
    factors: Option<&Tensor<B>>,
    cache: &mut KvLayer<B>,
) -> Result<()> {
    b.rope(q, &batch.pos, rope, factors)?;
    b.rope(k, &batch.pos, rope, factors)?;
    b.kv_write(k, v, &batch.slot, cache)
}

/// `attention` into `att`, then `matmul` of `att` by `w`.
#[allow(clippy::too_many_arguments)] // the trait op's arguments, passed through
pub fn attention_matmul<B: Backend>(
    b: &B,
    q: &Tensor<B>,
    cache: &KvLayer<B>,
    batch: &AttnBatch<B>,
    shape: &AttnShape,
    att: &mut Tensor<B>,
    w: &Weight<B>,
    dst: &mut Tensor<B>,
) -> Result<()> {
    b.attention(q, cache, batch, shape, att)?;
    b.matmul(att, w, dst)
}
