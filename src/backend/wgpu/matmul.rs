//! Matmul: fused dequantize + matrix-vector products. Quantized weights run `matmul_vec.wgsl`
//! (whole blocks per lane, four weight rows per subgroup team); float weights `matmul.wgsl`
//! (8-value groups per lane). Decode (m = 1) runs one row of x per workgroup; larger batches run
//! MB_BATCH rows per workgroup so each loaded weight is reused MB_BATCH times. Every lane sums in
//! the same order in both, so a row's result is bit-identical whatever the batch (the trait's
//! batch-invariance promise). With SHADER_F16 (unless `ULTRA_WGPU_DISABLE=f16`) matmul_vec forms
//! each block's products in f16 and accumulates across blocks in f32; the f16 choice depends on
//! the device only, never on m, so invariance holds on either path.

use super::Wgpu;
use super::kernels::{Kernel, VEC_WG, Variant};
use crate::backend::{DType, Tensor, Weight, expect_shape};
use crate::error::Result;

/// Rows of x per workgroup for m > 1.
const MB_BATCH: u32 = 8;
/// Threads per output row when reducing through workgroup memory.
const SHARED_TPR: u32 = 32;

pub fn matmul(be: &Wgpu, x: &Tensor<Wgpu>, w: &Weight<Wgpu>, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let (m, k, n) = (x.rows, w.cols, w.rows);
    expect_shape("matmul", x, m, k)?;
    expect_shape("matmul", dst, m, n)?;
    be.expect_dtypes("matmul", &[(x, DType::F32), (dst, DType::F32)])?;
    let info = w.storage.info;
    let params = [info[0], info[1], info[2], info[3], m as u32, n as u32];
    let (subgroups, tpr) = match be.ctx.subgroup_size {
        Some(size) => (true, size),
        None => (false, SHARED_TPR),
    };
    let mb = if m == 1 { 1 } else { MB_BATCH };
    if w.format.is_quantized() {
        // Whole blocks per lane, four weight rows per team of tpr lanes.
        let v = Variant { kernel: Kernel::MatmulVec, format: Some(w.format), subgroups, tpr, mb, f16: be.ctx.f16 };
        let rows_per_group = (VEC_WG / tpr * 4) as usize;
        let groups = [n.div_ceil(rows_per_group) as u32, m.div_ceil(mb as usize) as u32, 1];
        return be.ctx.dispatch(v, &[&w.storage.buf, &x.buf, &dst.buf], &params, groups);
    }
    let v = Variant { kernel: Kernel::Matmul, format: Some(w.format), subgroups, tpr, mb, f16: false };
    let rows_per_group = 256 / tpr as usize;
    let groups = [n.div_ceil(rows_per_group) as u32, m.div_ceil(mb as usize) as u32, 1];
    be.ctx.dispatch(v, &[&w.storage.buf, &x.buf, &dst.buf], &params, groups)
}
