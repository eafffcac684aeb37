//! Matmul: fused dequantize + GEMV (`shaders/matmul.wgsl`) for decode-sized batches, fused
//! dequantize + 64×64-tiled GEMM (`shaders/matmul_tiled.wgsl`) for prefill and larger batches.

use super::Wgpu;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, Weight, expect_shape};
use crate::error::Result;

/// Rows of x up to which the GEMV (which reads the weights once per row) beats the tiled GEMM.
const GEMV_MAX_ROWS: usize = 4;
/// Threads per output row of the GEMV when reducing through workgroup memory.
const SHARED_TPR: u32 = 32;

pub fn matmul(be: &Wgpu, x: &Tensor<Wgpu>, w: &Weight<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let (m, k, n) = (x.rows, w.cols, w.rows);
    expect_shape("matmul", x, m, k)?;
    expect_shape("matmul", dst, m, n)?;
    let info = w.storage.info;
    let params = [info[0], info[1], info[2], info[3], m as u32, n as u32];
    let bufs = [&w.storage.buf, &x.buf, &dst.buf];
    if m <= GEMV_MAX_ROWS {
        let (subgroups, tpr) = match be.ctx.subgroup_size {
            Some(size) => (true, size),
            None => (false, SHARED_TPR),
        };
        let v = Variant { kernel: Kernel::Matmul, format: Some(w.format), subgroups, tpr };
        let rows_per_group = 256 / tpr as usize;
        be.ctx.dispatch(v, &bufs, &params, [n.div_ceil(rows_per_group) as u32, m as u32, 1])
    } else {
        let v = Variant { format: Some(w.format), ..Variant::plain(Kernel::MatmulTiled) };
        be.ctx.dispatch(v, &bufs, &params, [n.div_ceil(64) as u32, m.div_ceil(64) as u32, 1])
    }
}
