//! RMSNorm (`shaders/rms_norm.wgsl`), alone or after the residual add (`shaders/add_rms_norm.wgsl`,
//! one dispatch for both): one workgroup per row. With `Variant::q8` the same dispatch also writes
//! dst's int8 blocks for the int8 GEMV that reads them next (`norm_apply_q8.wgsl`); opt-in
//! (`Options::norm_split`), the add + norm that writes int8 blocks spreads a row over d / 1024
//! workgroups (`add_rms_norm_split.wgsl`), the last of which writes x back.

use std::sync::Arc;

use super::Wgpu;
use super::context::GpuBuffer;
use super::kernels::{Kernel, Variant};
use crate::backend::{Tensor, check};
use crate::error::Result;

pub fn rms_norm(be: &Wgpu, x: &Tensor<Wgpu>, gain: &Tensor<Wgpu>, eps: f32, dst: &mut Tensor<Wgpu>) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::rms_norm(x, gain, dst)?;
    let v = Variant::plain(Kernel::RmsNorm);
    be.ctx.dispatch(v, &[&x.buf, &gain.buf, &dst.buf], &[d as u32, eps.to_bits(), rows as u32], [rows as u32, 1, 1])
}

/// x += y, then dst = rms_norm(x): add_assign's then rms_norm's bits, one dispatch.
pub fn add_rms_norm(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    y: &Tensor<Wgpu>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    dst: &mut Tensor<Wgpu>,
) -> Result<()> {
    let (rows, d) = (x.rows, x.cols);
    check::add_rms_norm(x, y, gain, dst)?;
    let v = Variant::plain(Kernel::AddRmsNorm);
    let params = [d as u32, eps.to_bits(), rows as u32];
    be.ctx.dispatch(v, &[&x.buf, &y.buf, &gain.buf, &dst.buf], &params, [rows as u32, 1, 1])
}

/// add_rms_norm_split.wgsl's threads per workgroup (each one vec4 of the row's output) and widest row
/// (WG · MAXK values per lane).
const SPLIT_WG: usize = 256;
const SPLIT_MAX_D: usize = SPLIT_WG * 32;

/// [x += y, then] dst = rms_norm(x), and dst's rows as int8 blocks (`q8_blocks.wgsl`, in the
/// context's int8-x buffer) in the same dispatch; x.cols must be a multiple of 32.
pub(super) fn norm_q8(
    be: &Wgpu,
    x: &mut Tensor<Wgpu>,
    y: Option<&Tensor<Wgpu>>,
    gain: &Tensor<Wgpu>,
    eps: f32,
    dst: &mut Tensor<Wgpu>,
) -> Result<Arc<GpuBuffer>> {
    let (rows, d) = (x.rows, x.cols);
    assert!(d.is_multiple_of(32), "norm_q8: rows of {d} values are not whole blocks");
    check::norm(x, y, gain, dst)?;
    let xq = super::matmul::int8_x(be, rows, d)?;
    let params = [d as u32, eps.to_bits(), rows as u32];
    match y {
        // One decode row over d / 1024 workgroups, the same bits (add_rms_norm_split.wgsl).
        Some(y) if be.ctx.norm_split && d <= SPLIT_MAX_D => {
            let done = be.ctx.norm_counters(rows)?;
            let v = Variant::plain(Kernel::AddRmsNormSplit);
            let bufs = [&x.buf, &y.buf, &gain.buf, &dst.buf, &xq, &done];
            be.ctx.dispatch(v, &bufs, &params, [d.div_ceil(4 * SPLIT_WG) as u32, rows as u32, 1])?
        }
        Some(y) => {
            let v = Variant { q8: true, ..Variant::plain(Kernel::AddRmsNorm) };
            be.ctx.dispatch(v, &[&x.buf, &y.buf, &gain.buf, &dst.buf, &xq], &params, [rows as u32, 1, 1])?
        }
        None => {
            let v = Variant { q8: true, ..Variant::plain(Kernel::RmsNorm) };
            be.ctx.dispatch(v, &[&x.buf, &gain.buf, &dst.buf, &xq], &params, [rows as u32, 1, 1])?
        }
    }
    Ok(xq)
}
