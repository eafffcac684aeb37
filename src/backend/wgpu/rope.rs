//! Rotary embeddings (`shaders/rope.wgsl`), the fused per-head RMSNorm + RoPE
//! (`shaders/rms_norm_rope.wgsl`), both in place, normal and neox pairings, and RoPE of q and k
//! with the KV cache write in one dispatch (`shaders/rope_kv_write.wgsl`, and for an f16 cache
//! `shaders/rope_kv_write_f16.wgsl`).

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{AttnBatch, DType, KvLayer, Rope, RopeStyle, Tensor, check};
use crate::error::Result;

/// The shared leading parameters: [n_tokens, n_heads, head_dim, n_rot, theta, freq_scale, neox,
/// has_ff] (of checked arguments).
fn rope_params(x: &Tensor<Wgpu>, rope: &Rope, factors: Option<&Tensor<Wgpu>>) -> [u32; 8] {
    let neox = (rope.style == RopeStyle::Neox) as u32;
    let n_heads = (x.cols / rope.head_dim) as u32;
    [
        x.rows as u32,
        n_heads,
        rope.head_dim as u32,
        rope.n_rot as u32,
        rope.theta.to_bits(),
        rope.freq_scale.to_bits(),
        neox,
        factors.is_some() as u32,
    ]
}

pub fn rope(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    pos: &Tensor<Wgpu>,
    rope: &Rope,
    factors: Option<&Tensor<Wgpu>>,
) -> Result<()> {
    check::rope("rope", x, pos, rope, factors)?;
    let p = rope_params(x, rope, factors);
    let threads = x.rows * p[1] as usize * rope.n_rot / 2;
    // Without factors the kernel never reads its `ff` binding: pos (read-only too) stands in.
    let ff = factors.map_or(&pos.buf, |f| &f.buf);
    be.ctx.dispatch(Variant::plain(Kernel::Rope), &[&x.buf, &pos.buf, ff], &p, be.ctx.grid_1d(threads))
}

pub fn rms_norm_rope(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    pos: &Tensor<Wgpu>,
    rope: &Rope,
    factors: Option<&Tensor<Wgpu>>,
) -> Result<()> {
    check::rms_norm_rope(x, gain, pos, rope, factors)?;
    let p = rope_params(x, rope, factors);
    let params = [p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], eps.to_bits()];
    let v = Variant::plain(Kernel::RmsNormRope);
    let ff = factors.map_or(&pos.buf, |f| &f.buf);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &pos.buf, ff], &params, [p[1], x.rows as u32, 1])
}

/// rope(q), rope(k), then kv_write(k, v) at the batch's slots, as one dispatch for an f32 cache and
/// an even head_dim (every model's; an odd one would leave a head's last value out of the pairs),
/// or an f16 cache where head_dim and n_rot are multiples of 4 (each thread writes whole cache
/// words); otherwise (a q8_0 cache: a block spans pairs whose neox partners lie in other blocks)
/// the three ops. The rotation is rope.wgsl's `rotate` and the rounding kv_write_f16's `f16_bits`,
/// so the bits are the three ops'.
#[allow(clippy::too_many_arguments)] // Backend::rope_kv_write's
pub fn rope_kv_write(
    be: &Wgpu,
    q: &mut Tensor<Wgpu>,
    k: &mut Tensor<Wgpu>,
    v: &Tensor<Wgpu>,
    batch: &AttnBatch<Wgpu>,
    rope_: &Rope,
    factors: Option<&Tensor<Wgpu>>,
    cache: &mut KvLayer<Wgpu>,
) -> Result<()> {
    check::rope("rope_kv_write", q, &batch.pos, rope_, factors)?;
    check::rope("rope_kv_write", k, &batch.pos, rope_, factors)?;
    check::kv_write(k, v, &batch.slot, cache)?;
    // Its 8 storage bindings: every WebGPU adapter has them, a minimal Vulkan one may not.
    let fused = match cache.k.dtype {
        DType::F32 => rope_.head_dim.is_multiple_of(2).then_some(Kernel::RopeKvWrite),
        // Whole cache words per thread: quads of k (two pairs) and pairs of v.
        DType::F16 => {
            (rope_.head_dim.is_multiple_of(4) && rope_.n_rot.is_multiple_of(4)).then_some(Kernel::RopeKvWriteF16)
        }
        DType::Q8_0 | DType::U32 => None,
    };
    let Some(kernel) = fused.filter(|_| be.ctx.limits.max_storage_buffers_per_shader_stage >= 8) else {
        rope(be, q, &batch.pos, rope_, factors)?;
        rope(be, k, &batch.pos, rope_, factors)?;
        return super::attention::kv_write(be, k, v, &batch.slot, cache);
    };
    let p = rope_params(q, rope_, factors);
    let n_kv_heads = k.cols / rope_.head_dim;
    let params = [p[0], p[1], n_kv_heads as u32, p[2], p[3], p[4], p[5], p[6], p[7], cache.k.rows as u32];
    let q_pairs = q.rows * p[1] as usize * rope_.n_rot / 2;
    // f32: a thread per k pair and per v value; f16: per k quad and per pair of v values.
    let threads = if kernel == Kernel::RopeKvWrite {
        q_pairs + k.len() / 2 + v.len()
    } else {
        q_pairs + k.len() / 4 + v.len() / 2
    };
    let ff = factors.map_or(&batch.pos.buf, |f| &f.buf);
    let bufs = [&q.buf, &k.buf, &v.buf, &batch.pos.buf, &batch.slot.buf, ff, &cache.k.buf, &cache.v.buf];
    be.ctx.dispatch(Variant::plain(kernel), &bufs, &params, be.ctx.grid_1d(threads))
}
