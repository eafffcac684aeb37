//! Memory: tensors, host transfers (the only ones: write_*, read_*), and weight upload with the
//! repacking of 18–34-byte ggml blocks into word-aligned sections the kernels read as u32.

use std::sync::atomic::Ordering;

use super::Wgpu;
use super::context::GpuBuffer;
use super::kernels;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::Format;

/// A weight on the device: its words and where each section starts (see `repack`).
pub struct GpuWeight {
    pub(crate) buf: GpuBuffer,
    /// [k, blocks per row, word offset of qh, word offset of scales] — every legacy weight
    /// kernel's `WeightInfo` (shaders/common.wgsl).
    pub(crate) info: [u32; 4],
    /// Word offset of each field's section (`Format::fields` order): what kernels of formats with
    /// more fields (k-quants: several scale arrays per super-block) read their sections by.
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

#[cfg(not(target_arch = "wasm32"))]
pub fn read_f32(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [f32]) -> Result<()> {
    check::transfer("read_f32", src, DType::F32, out.len())?;
    be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(out))
}

#[cfg(not(target_arch = "wasm32"))]
pub fn read_u32(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [u32]) -> Result<()> {
    check::transfer("read_u32", src, DType::U32, out.len())?;
    be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(out))
}

/// A page cannot block on WebGPU: its reads are `read_*_async` (the same paths, awaited).
#[cfg(target_arch = "wasm32")]
pub fn read_f32(_: &Wgpu, _: &Tensor<Wgpu>, _: &mut [f32]) -> Result<()> {
    Err(blocking_read())
}

#[cfg(target_arch = "wasm32")]
pub fn read_u32(_: &Wgpu, _: &Tensor<Wgpu>, _: &mut [u32]) -> Result<()> {
    Err(blocking_read())
}

#[cfg(target_arch = "wasm32")]
fn blocking_read() -> Error {
    Error::Unsupported {
        op: "read",
        backend: "wgpu",
        detail: "blocking reads in a browser (WebGPU maps buffers asynchronously: use the *_async API)".into(),
    }
}

#[cfg(target_arch = "wasm32")]
pub async fn read_f32_async(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [f32]) -> Result<()> {
    check::transfer("read_f32", src, DType::F32, out.len())?;
    be.ctx.read_bytes_async(&src.buf, bytemuck::cast_slice_mut(out)).await
}

#[cfg(target_arch = "wasm32")]
pub async fn read_u32_async(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [u32]) -> Result<()> {
    check::transfer("read_u32", src, DType::U32, out.len())?;
    be.ctx.read_bytes_async(&src.buf, bytemuck::cast_slice_mut(out)).await
}

pub fn sync(be: &Wgpu) -> Result<()> {
    be.ctx.flush(None)?;
    be.ctx.wait()
}

pub fn upload_weight(be: &Wgpu, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Wgpu>> {
    let src = bytes.bytes();
    check::upload_weight(format, rows, cols, src.len())?;
    if !kernels::has_kernels(format) {
        return Err(Error::Unsupported {
            op: "upload_weight",
            backend: "wgpu",
            detail: format!("{} weights (its kernels are not written yet; the cpu backend runs them)", format.name()),
        });
    }
    let (words, fields) = repack(format, src);
    let blocks = if format.is_quantized() { cols / format.block_len() } else { cols };
    let buf = be.ctx.buffer((words.len() * 4) as u64, "weight")?;
    be.ctx.queue.write_buffer(&buf.buf, 0, bytemuck::cast_slice(&words));
    let at = |name: &str| format.fields().iter().position(|f| f.name == name).map(|i| fields[i]);
    // The legacy kernels' WeightInfo: Q5's fifth bits, then the scales (d, or d and m).
    let scales = at("dm").or(at("d")).unwrap_or(0);
    let info = [cols as u32, blocks as u32, at("qh").unwrap_or(scales), scales];
    Ok(Weight { storage: GpuWeight { buf, info, fields }, format, rows, cols })
}

/// The kernels' layout of a weight: one word-aligned section per field of the format's blocks
/// (`Format::fields`), each the field's bytes of every block back to back: for the legacy formats
/// `qs` (16 or 32 quant bytes a block) | `qh` (Q5's fifth bits, a word a block) | scales (`d` of
/// two blocks per word, or `(d, m)` of one block per word); float formats are one section, their
/// values. The sizes add up to the GGUF bytes (up to padding). Returns the words and the word
/// offset of each section.
fn repack(format: Format, src: &[u8]) -> (Vec<u32>, Vec<u32>) {
    let mut bytes: Vec<u8> = Vec::with_capacity(src.len() + 16 * format.fields().len());
    let mut offsets = Vec::with_capacity(format.fields().len());
    for f in format.fields() {
        offsets.push((bytes.len() / 4) as u32);
        src.chunks_exact(format.block_bytes()).for_each(|b| bytes.extend_from_slice(&b[f.start..f.end]));
        bytes.resize(bytes.len().next_multiple_of(4), 0);
    }
    // Whole vec4s: matmul_vec binds the buffer as array<vec4<u32>>.
    bytes.resize(bytes.len().next_multiple_of(16), 0);
    let words = bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    (words, offsets)
}

/// Host↔device transfers so far (write_* and read_* calls; weight uploads not counted).
pub fn transfer_count(be: &Wgpu) -> u64 {
    be.ctx.transfers.load(Ordering::Relaxed)
}
