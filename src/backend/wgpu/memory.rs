//! Memory: tensors, host transfers (the only ones: write_*, read_*), and weight upload with the
//! repacking of ggml blocks into word-aligned sections the kernels read as u32 (`repack.rs`).

use std::sync::atomic::Ordering;

use super::Wgpu;
use super::context::GpuBuffer;
use super::repack::repack;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::Result;
use crate::quant::Format;

/// A weight on the device: its words and where each section starts (see `repack`).
pub struct GpuWeight {
    pub(crate) buf: GpuBuffer,
    /// [k, 32-value blocks per row, word offset of qh (Q3_K: hmask), of d (or dm), of the
    /// k-quants' packed sub-block scales, 0, 0, 0] — every weight kernel's `WeightInfo`
    /// (shaders/common.wgsl).
    pub(crate) info: [u32; 8],
    /// Word offset of each field's section (`Format::fields` order; `info` holds those the
    /// kernels read).
    pub fields: Vec<u32>,
}

pub fn alloc(be: &Wgpu, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Wgpu>> {
    let mut buf = be.ctx.buffer((rows * cols * 4) as u64, "tensor")?;
    buf.mirror = HostMirror::new(dtype, rows * cols);
    Ok(Tensor { buf, rows, cols, dtype })
}

pub fn write_f32(be: &Wgpu, dst: &mut Tensor<Wgpu>, data: &[f32]) -> Result<()> {
    check::transfer("write_f32", dst, DType::F32, data.len())?;
    be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(data))
}

pub fn write_u32(be: &Wgpu, dst: &mut Tensor<Wgpu>, data: &[u32]) -> Result<()> {
    check::transfer("write_u32", dst, DType::U32, data.len())?;
    dst.buf.mirror.record(data);
    be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(data))
}

pub fn read_f32(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [f32]) -> Result<()> {
    check::transfer("read_f32", src, DType::F32, out.len())?;
    be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(out))
}

pub fn read_u32(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [u32]) -> Result<()> {
    check::transfer("read_u32", src, DType::U32, out.len())?;
    be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(out))
}

pub fn sync(be: &Wgpu) -> Result<()> {
    be.ctx.flush(None)?;
    be.ctx.wait()
}

pub fn upload_weight(be: &Wgpu, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Wgpu>> {
    let src = bytes.bytes();
    check::upload_weight(format, rows, cols, src.len())?;
    let (words, fields) = repack(format, src);
    // Kernels address quantized rows in blocks of 32 values (a k-quant super-block is 8 of them).
    let blocks = if format.is_quantized() { cols / 32 } else { cols };
    let buf = be.ctx.buffer((words.len() * 4) as u64, "weight")?;
    be.ctx.queue.write_buffer(&buf.buf, 0, bytemuck::cast_slice(&words));
    let at = |name: &str| format.fields().iter().position(|f| f.name == name).map(|i| fields[i]);
    let d = at("dm").or(at("d")).unwrap_or(0);
    let qh = at("qh").or(at("hmask")).unwrap_or(d);
    let info = [cols as u32, blocks as u32, qh, d, at("scales").unwrap_or(0), 0, 0, 0];
    Ok(Weight { storage: GpuWeight { buf, info, fields }, format, rows, cols })
}

/// Host↔device transfers so far (write_* and read_* calls; weight uploads not counted).
pub fn transfer_count(be: &Wgpu) -> u64 {
    be.ctx.transfers.load(Ordering::Relaxed)
}
