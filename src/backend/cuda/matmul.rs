//! Matrix products on CUDA: `cuda/matmul.cu` joined after the weight's format decoder.
//! m ≤ 8 (decode, small batches): a GEMV with warp-per-row(s); for quantized weights the
//! activations are first quantized to int8 blocks (`cuda/quantize_q8_1.cu`) and the dot products
//! use dp4a, as llama.cpp's MMVQ. m > 8 (prefill): a shared-memory tiled GEMM in f32.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::{Cuda, driver, grid_1d};
use super::source::Module;
use crate::backend::{DType, Tensor, Weight, expect_shape};
use crate::error::{Error, Result};

/// Largest m served by the GEMV kernels.
const VEC_MAX_M: usize = 8;
const VEC_THREADS: u32 = 128;

pub fn matmul(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows, w.rows, w.cols);
    expect_shape("matmul", x, m, k)?;
    expect_shape("matmul", dst, m, n)?;
    if x.dtype != DType::F32 || dst.dtype != DType::F32 {
        return Err(Error::InvalidArgument("matmul: x and dst must be f32".into()));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if m <= VEC_MAX_M { matmul_vec(cuda, x, w, dst) } else { matmul_tile(cuda, x, w, dst) }
}

fn matmul_vec(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows, w.rows, w.cols);
    let (entry, per_launch) = match m {
        1 => ("matmul_vec_m1", 1),
        2 => ("matmul_vec_m2", 2),
        3 | 4 => ("matmul_vec_m4", 4),
        _ => ("matmul_vec_m8", 8),
    };
    // Lanes per output row: the largest power of two ≤ the lane work items (blocks or values), ≤ 32.
    let items = if w.format.is_quantized() { k / 32 } else { k };
    let group = (1u32 << (usize::BITS - 1 - items.max(1).leading_zeros())).min(32);
    let rows_per_block = (VEC_THREADS / 32) * (32 / group);
    let cfg = LaunchConfig {
        grid_dim: ((n as u32).div_ceil(rows_per_block), m.div_ceil(per_launch) as u32, 1),
        block_dim: (VEC_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let (m32, n32, k32) = (m as u32, n as u32, k as u32);
    let f = cuda.function(Module::Matmul(w.format), entry)?;
    let s = &w.storage;
    if !w.format.is_quantized() {
        let mut l = cuda.stream.launch_builder(&f);
        l.arg(&s.qs).arg(&s.qh).arg(&s.dm).arg(&x.buf).arg(&x.buf).arg(&mut dst.buf);
        l.arg(&m32).arg(&n32).arg(&k32).arg(&group);
        // SAFETY: arguments match matmul_vec_mM in cuda/matmul.cu; float weights read qs only
        // (n · k values), x holds m · k floats (also passed, unused, as xds), dst m · n floats.
        unsafe { l.launch(cfg) }.map_err(driver)?;
        return Ok(());
    }
    // Quantize x: int8 values [m][k] then (d, d·Σq) pairs [m][k/32], 16-byte aligned.
    let total = (m * k) as u64;
    let xds_at = (m * k).next_multiple_of(16);
    let mut guard = cuda.scratch(&cuda.q8_scratch, xds_at + m * (k / 32) * 8)?;
    let scratch = guard.as_mut().expect("scratch allocated");
    let (mut xq, mut xds) = scratch.split_at_mut(xds_at);
    let q = cuda.function(Module::QuantizeQ8_1, "quantize_q8_1")?;
    let mut l = cuda.stream.launch_builder(&q);
    l.arg(&x.buf).arg(&mut xq).arg(&mut xds).arg(&total);
    // SAFETY: arguments match cuda/quantize_q8_1.cu; x holds total floats, xq total bytes, xds
    // total / 32 float2 (k is a multiple of 32 for quantized formats).
    unsafe { l.launch(grid_1d(total, 256)?) }.map_err(driver)?;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&s.qs).arg(&s.qh).arg(&s.dm).arg(&mut xq).arg(&mut xds).arg(&mut dst.buf);
    l.arg(&m32).arg(&n32).arg(&k32).arg(&group);
    // SAFETY: arguments match matmul_vec_mM in cuda/matmul.cu; the weight arrays hold n · k / 32
    // blocks (qs 16-byte aligned), xq/xds as written above, dst m · n floats.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}

fn matmul_tile(cuda: &Cuda, x: &Tensor<Cuda>, w: &Weight<Cuda>, dst: &mut Tensor<Cuda>) -> Result<()> {
    let (m, n, k) = (x.rows as u32, w.rows as u32, w.cols as u32);
    let f = cuda.function(Module::Matmul(w.format), "matmul_tile")?;
    let cfg =
        LaunchConfig { grid_dim: (n.div_ceil(64), m.div_ceil(64), 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let s = &w.storage;
    let mut l = cuda.stream.launch_builder(&f);
    l.arg(&s.qs).arg(&s.qh).arg(&s.dm).arg(&x.buf).arg(&mut dst.buf).arg(&m).arg(&n).arg(&k);
    // SAFETY: arguments match matmul_tile in cuda/matmul.cu; weight n · k values, x m · k floats, dst m · n.
    unsafe { l.launch(cfg) }.map_err(driver)?;
    Ok(())
}
