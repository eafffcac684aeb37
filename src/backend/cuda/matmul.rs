//! Matrix products on CUDA: `cuda/matmul.cu` joined after the weight's format decoder.
//! m ≤ 8 (decode, small batches): a GEMV with warp-per-row(s); for quantized weights the
//! activations are first quantized to int8 blocks (`cuda/quantize_q8_1.cu`) and the dot products
//! use dp4a, as llama.cpp's MMVQ. m > 8 (prefill, batches, speculative verification): quantized
//! weights go through f16 tensor cores (`cuda/matmul_mma.cu`: exact integer quants, x rounded to
//! f16, f32 accumulation, scales applied per block); float weights through a shared-memory tiled
//! GEMM in f32 (`matmul_tile`). An int8 tensor-core variant (x quantized as for the GEMV) beat SIMT
//! too, but its prefill error (NMSE 3e-3 on the reference model) failed the e2e tests
//! (benches/notes/cuda.md, v2a).

use cudarc::driver::{CudaViewMut, DevicePtr, LaunchConfig, PushKernelArg};

use super::context::{Cuda, driver, grid_1d};
use super::source::Module;
use crate::backend::{DType, Tensor, Weight, expect_shape};
use crate::error::{Error, Result};

/// Largest m served by the GEMV kernels.
pub(super) const VEC_MAX_M: usize = 8;
const VEC_THREADS: u32 = 128;
/// Output tile of matmul_mma: MMA_BM activation rows × MMA_BN weight rows (cuda/matmul_mma.cu).
const MMA_BM: u32 = 64;
const MMA_BN: u32 = 128;

/// Profile row of one call: path, format, shape; bytes = the weight, read once.
pub fn label(x: &Tensor<Cuda>, w: &Weight<Cuda>) -> (String, u64) {
    let path = if x.rows <= VEC_MAX_M {
        "vec"
    } else if w.format.is_quantized() {
        "mma"
    } else {
        "tile"
    };
    let bytes = w.format.row_bytes(w.cols).unwrap_or(0) * w.rows;
    (format!("matmul_{path} {} m{} n{} k{}", w.format.name(), x.rows, w.rows, w.cols), bytes as u64)
}

/// Profile row of a [`matmuls`] call: the first weight's row, with every weight's bytes.
pub fn label_many(x: &Tensor<Cuda>, parts: &[Part]) -> (String, u64) {
    let Some((w, _)) = parts.first() else { return ("matmuls (none)".into(), 0) };
    let (name, _) = label(x, w);
    let bytes = parts.iter().map(|(w, _)| label(x, w).1).sum();
    (format!("{name} ×{}", parts.len()), bytes)
}

/// One matmul of a [`matmuls`] call: its weight and its output.
pub type Part<'a, 'b> = (&'a Weight<Cuda>, &'b mut Tensor<Cuda>);

pub fn matmul(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    if !check(x, w, dst)? {
        return Ok(());
    }
    if x.rows <= VEC_MAX_M {
        matmul_vec(cuda, x, &mut [(w, dst)])
    } else if w.format.is_quantized() {
        matmul_mma(cuda, x, w, dst)
    } else {
        matmul_tile(cuda, x, w, dst)
    }
}

/// Several matmuls of one x: one GEMV launch for up to three weights of one format when
/// m ≤ 8 (decode: q, k, v in one launch, gate and up in another), else one by one.
pub fn matmuls(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<()> {
    let format = parts.first().map(|(w, _)| w.format);
    let fused = x.rows <= VEC_MAX_M && parts.len() <= 3 && parts.iter().all(|(w, _)| Some(w.format) == format);
    if !fused {
        return parts.iter_mut().try_for_each(|(w, dst)| matmul(cuda, x, w, dst));
    }
    for (w, dst) in parts.iter() {
        check(x, w, dst)?;
    }
    // A part with n = 0 gets no blocks; matmul_vec returns early when nothing is left.
    matmul_vec(cuda, x, parts)
}

/// Shapes and dtypes of one matmul; false when there is nothing to compute.
fn check(x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &Tensor<Cuda>) -> Result<bool> {
    let (m, n, k) = (x.rows, w.rows, w.cols);
    expect_shape("matmul", x, m, k)?;
    expect_shape("matmul", dst, m, n)?;
    if x.dtype != DType::F32 || dst.dtype != DType::F32 {
        return Err(Error::InvalidArgument("matmul: x and dst must be f32".into()));
    }
    Ok(m > 0 && n > 0)
}

/// m ≤ 8: the GEMV kernels, for 1–3 weights of one format and width that share x (`parts`).
fn matmul_vec(cuda: &Cuda, x: &Tensor<Cuda>, parts: &mut [Part]) -> Result<()> {
    let (m, k) = (x.rows, x.cols);
    let format = parts[0].0.format;
    let (entry, per_launch) = match m {
        1 => ("matmul_vec_m1", 1),
        2 => ("matmul_vec_m2", 2),
        3 | 4 => ("matmul_vec_m4", 4),
        _ => ("matmul_vec_m8", 8),
    };
    // Lanes per output row: the largest power of two ≤ the lane work items (blocks or values), ≤ 32.
    let items = if format.is_quantized() { k / 32 } else { k };
    let group = (1u32 << (usize::BITS - 1 - items.max(1).leading_zeros())).min(32);
    let rows_per_block = (VEC_THREADS / 32) * (32 / group);
    let n: [u32; 3] = std::array::from_fn(|i| parts.get(i).map_or(0, |(w, _)| w.rows as u32));
    let blocks: u32 = n.iter().map(|n| n.div_ceil(rows_per_block)).sum();
    if m == 0 || blocks == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid_dim: (blocks, m.div_ceil(per_launch) as u32, 1),
        block_dim: (VEC_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (m32, k32) = (m as u32, k as u32);
    let f = cuda.function(Module::Matmul(format), entry)?;
    let launch = |xq: u64, xds: u64, parts: &mut [Part]| -> Result<()> {
        let mut l = cuda.stream.launch_builder(&f);
        let first = parts[0].0;
        let mut rest = parts.iter_mut();
        for n_i in &n {
            match rest.next() {
                Some((w, dst)) => l.arg(&w.storage.qs).arg(&w.storage.qh).arg(&w.storage.dm).arg(&mut dst.buf.dev),
                // An unused part: n = 0, so no block reads these pointers.
                None => l.arg(&first.storage.qs).arg(&first.storage.qh).arg(&first.storage.dm).arg(&first.storage.qs),
            };
            l.arg(n_i);
        }
        l.arg(&xq).arg(&xds).arg(&m32).arg(&k32).arg(&group);
        // SAFETY: arguments match matmul_vec_mM in cuda/matmul.cu; each used part's weight arrays
        // hold n_i · k values or k / 32 blocks per row (qs 16-byte aligned) and its dst m · n_i floats
        // (checked by `check`); xq, xds point at x (m · k floats) or at the planes with_q8_1 wrote,
        // which stay alive and untouched until the launch is queued.
        unsafe { l.launch(cfg) }.map_err(driver)?;
        Ok(())
    };
    if !format.is_quantized() {
        // Float weights read x directly (also passed, unused, as xds).
        let xf = x.buf.dev.device_ptr(&cuda.stream).0;
        return launch(xf, xf, parts);
    }
    with_q8_1(cuda, x, |xq, xds| launch(xq.device_ptr(&cuda.stream).0, xds.device_ptr(&cuda.stream).0, parts))
}

/// Quantizes x [m, k] into the q8 scratch — two int8 planes [2][m][k], then (d, d·Σq) pairs
/// [2][m][k/32] 16-byte aligned (`cuda/quantize_q8_1.cu`) — and calls `then(xq, xds)` while it is
/// held. Consecutive matmuls of one x (q, k, v; gate, up) quantize it once: the scratch is reused
/// when the op just before this one quantized the same buffer (no op ran in between that could
/// have written x or the scratch). The decision depends only on the op sequence, so a recorded
/// CUDA graph replays it unchanged.
fn with_q8_1(
    cuda: &Cuda,
    x: &Tensor<Cuda>,
    then: impl FnOnce(&mut CudaViewMut<u8>, &mut CudaViewMut<u8>) -> Result<()>,
) -> Result<()> {
    let total = x.len() as u64;
    let (xds_at, bytes) = q8_layout(x.len());
    let mut guard = cuda.scratch(&cuda.q8_scratch, bytes)?;
    let key = (x.buf.dev.device_ptr(&cuda.stream).0, x.len());
    let fresh = cuda.q8_holds(key);
    let scratch = guard.as_mut().expect("scratch allocated");
    let (mut xq, mut xds) = scratch.split_at_mut(xds_at);
    if !fresh {
        let q = cuda.function(Module::QuantizeQ8_1, "quantize_q8_1")?;
        let mut l = cuda.stream.launch_builder(&q);
        l.arg(&x.buf.dev).arg(&mut xq).arg(&mut xds).arg(&total);
        // SAFETY: arguments match cuda/quantize_q8_1.cu; x holds total floats, xq 2 · total bytes,
        // xds 2 · total / 32 float2 (k is a multiple of 32 for quantized formats).
        unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    }
    then(&mut xq, &mut xds)?;
    cuda.q8_quantized(key);
    Ok(())
}

/// Where the q8 scratch puts the scales of `total` quantized values, and its size: the two int8
/// planes (2 · total bytes), then 16-byte aligned (d, d·Σq) float2 pairs for each plane's blocks.
pub(super) fn q8_layout(total: usize) -> (usize, usize) {
    let xds_at = (2 * total).next_multiple_of(16);
    (xds_at, xds_at + 2 * (total / 32) * 8)
}

/// m > 8 with quantized weights: f16 tensor cores (`cuda/matmul_mma.cu`) on x rounded to f16.
fn matmul_mma(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let module = Module::Matmul(w.format);
    // Scratch: xh f16 [m][k], then xsum f32 [m][k/32] 16-byte aligned.
    let total = x.len() as u64;
    let xsum_at = (x.len() * 2).next_multiple_of(16);
    let mut guard = cuda.scratch(&cuda.q8_scratch, xsum_at + x.len() / 32 * 4)?;
    let scratch = guard.as_mut().expect("scratch allocated");
    let (mut xh, mut xsum) = scratch.split_at_mut(xsum_at);
    let prep = cuda.function(module, "matmul_mma_prep")?;
    let mut l = cuda.stream.launch_builder(&prep);
    l.arg(&x.buf.dev).arg(&mut xh).arg(&mut xsum).arg(&total);
    // SAFETY: arguments match matmul_mma_prep in cuda/matmul_mma.cu; x holds total floats, xh
    // total halves, xsum total / 32 floats (k is a multiple of 32 for quantized formats).
    unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    let f = cuda.function(module, "matmul_mma")?;
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(MMA_BN), m.div_ceil(MMA_BM), 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let s = &w.storage;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&s.qs).arg(&s.qh).arg(&s.dm).arg(&mut xh).arg(&mut xsum).arg(&mut dst.buf.dev);
    l.arg(&m).arg(&n).arg(&k);
    // SAFETY: arguments match matmul_mma in cuda/matmul_mma.cu; the weight arrays hold n · k / 32
    // blocks (dm padded by 16 bytes for the paired-word reads), xh m · k halves and xsum m · k / 32
    // floats as written above (16-byte aligned), dst m · n floats.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

/// m > 8 with float weights: the f32 SIMT tile (also the readable reference of the tiled GEMM).
fn matmul_tile(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let f = cuda.function(Module::Matmul(w.format), "matmul_tile")?;
    let cfg =
        LaunchConfig { grid_dim: (n.div_ceil(64), m.div_ceil(64), 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let s = &w.storage;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&s.qs).arg(&s.qh).arg(&s.dm).arg(&x.buf.dev).arg(&mut dst.buf.dev).arg(&m).arg(&n).arg(&k);
    // SAFETY: arguments match matmul_tile in cuda/matmul.cu; weight n · k values, x m · k floats, dst m · n.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
