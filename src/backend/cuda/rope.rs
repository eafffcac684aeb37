//! Rotary embeddings on CUDA: `cuda/rope.cu`, `cuda/rms_norm_rope.cu` and `cuda/rope_kv_write.cu`
//! (rope of q and k, then their cache write), one block per (token, head).

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::context::Cuda;
use super::driver::driver;
use super::kernels::{Module, entry};
use crate::backend::{AttnBatch, DType, KvLayer, Rope, RopeStyle, Tensor, check};
use crate::error::Result;

/// The launch over n_tokens · n_heads blocks (of checked arguments), None when empty.
fn geometry(x: &Tensor<Cuda>, rope: &Rope) -> Option<(LaunchConfig, u32)> {
    let n_heads = x.cols / rope.head_dim;
    let blocks = x.rows * n_heads;
    if blocks == 0 {
        return None;
    }
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    Some((cfg, n_heads as u32))
}

/// Null for "no frequency factors" (the kernels test the pointer).
const NO_FACTORS: u64 = 0;

pub fn rope(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    pos: &Tensor<Cuda>,
    rope: &Rope,
    factors: Option<&Tensor<Cuda>>,
) -> Result<()> {
    check::rope("rope", x, pos, rope, factors)?;
    let Some((cfg, n_heads)) = geometry(x, rope) else { return Ok(()) };
    let f = cuda.function(Module::Rope, entry::ROPE)?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    match factors {
        Some(f) => l.arg(&f.buf.dev),
        None => l.arg(&NO_FACTORS),
    };
    // SAFETY: arguments match cuda/rope.cu; x holds rows · n_heads · head_dim floats, pos rows u32,
    // factors (a device pointer, or null) n_rot / 2 floats (check::rope).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

pub fn rms_norm_rope(
    cuda: &Cuda,
    x: &mut Tensor<Cuda>,
    gain: &Tensor<Cuda>,
    eps: f32,
    pos: &Tensor<Cuda>,
    rope: &Rope,
    factors: Option<&Tensor<Cuda>>,
) -> Result<()> {
    check::rms_norm_rope(x, gain, pos, rope, factors)?;
    let Some((cfg, n_heads)) = geometry(x, rope) else { return Ok(()) };
    let f = cuda.function(Module::RmsNormRope, entry::RMS_NORM_ROPE)?;
    let (head_dim, n_rot, neox) = (rope.head_dim as u32, rope.n_rot as u32, (rope.style == RopeStyle::Neox) as u32);
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut x.buf.dev).arg(&gain.buf.dev).arg(&eps).arg(&pos.buf.dev).arg(&n_heads).arg(&head_dim).arg(&n_rot);
    l.arg(&rope.theta).arg(&rope.freq_scale).arg(&neox);
    match factors {
        Some(f) => l.arg(&f.buf.dev),
        None => l.arg(&NO_FACTORS),
    };
    // SAFETY: arguments match cuda/rms_norm_rope.cu; x holds rows · n_heads · head_dim floats, gain
    // head_dim, factors (a device pointer, or null) n_rot / 2 floats.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// The rotation's arguments of `cuda/rope_kv_write.cu`, laid out as its by-value `RopeArgs`.
#[repr(C)]
struct RopeArgs {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    n_rot: u32,
    theta: f32,
    freq_scale: f32,
    neox: u32,
}

// SAFETY: plain data in C layout (seven 4-byte fields, no padding), as the kernel's by-value struct.
unsafe impl DeviceRepr for RopeArgs {}

/// rope of q and of k, then k's and v's rows into the cache at the batch's slots: one launch over
/// the heads of both (`cuda/rope_kv_write.cu`), the bits of `rope`, `rope`, `kv_write`.
#[allow(clippy::too_many_arguments)] // the trait's op: three tensors, the batch, the rotation, the cache
pub fn rope_kv_write(
    cuda: &Cuda,
    q: &mut Tensor<Cuda>,
    k: &mut Tensor<Cuda>,
    v: &Tensor<Cuda>,
    batch: &AttnBatch<Cuda>,
    rope: &Rope,
    factors: Option<&Tensor<Cuda>>,
    cache: &mut KvLayer<Cuda>,
) -> Result<()> {
    check::rope("rope_kv_write", q, &batch.pos, rope, factors)?;
    check::rope("rope_kv_write", k, &batch.pos, rope, factors)?;
    check::kv_write(k, v, &batch.slot, cache)?;
    let (n_heads, n_kv_heads) = (q.cols / rope.head_dim, k.cols / rope.head_dim);
    let blocks = q.rows * (n_heads + n_kv_heads);
    if blocks == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    let args = RopeArgs {
        n_heads: n_heads as u32,
        n_kv_heads: n_kv_heads as u32,
        head_dim: rope.head_dim as u32,
        n_rot: rope.n_rot as u32,
        theta: rope.theta,
        freq_scale: rope.freq_scale,
        neox: (rope.style == RopeStyle::Neox) as u32,
    };
    let name = if cache.k.dtype == DType::F16 { entry::ROPE_KV_WRITE_F16 } else { entry::ROPE_KV_WRITE };
    let f = cuda.function(Module::RopeKvWrite, name)?;
    let n_slots = cache.k.rows as u32;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&mut q.buf.dev).arg(&mut k.buf.dev).arg(&v.buf.dev).arg(&batch.pos.buf.dev).arg(&batch.slot.buf.dev);
    match factors {
        Some(f) => l.arg(&f.buf.dev),
        None => l.arg(&NO_FACTORS),
    };
    l.arg(&mut cache.k.buf.dev).arg(&mut cache.v.buf.dev).arg(&n_slots).arg(&args);
    // SAFETY: arguments match the entry of the cache's dtype in cuda/rope_kv_write.cu; q holds rows ·
    // n_heads · head_dim floats, k and v rows · n_kv_heads · head_dim, pos and slot rows u32, factors (or
    // null) n_rot / 2 floats, each cache half n_slots rows of k's width (check::rope, check::kv_write;
    // slots out of range are skipped).
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
