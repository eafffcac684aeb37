//! Memory: tensors, host transfers (the only ones: write_*, read_*), and weight upload with the
//! repacking of 18–34-byte ggml blocks into word-aligned sections the kernels read as u32.

use std::sync::atomic::Ordering;

use super::Wgpu;
use super::context::GpuBuffer;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::Format;

/// A weight on the device: its words and where each section starts (see `repack`).
pub struct GpuWeight {
    pub(crate) buf: GpuBuffer,
    /// [k, blocks per row, word offset of qh, word offset of scales] — every weight kernel's
    /// `WeightInfo` (shaders/common.wgsl).
    pub(crate) info: [u32; 4],
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
    let (words, qh, d) = repack(format, src)?;
    let blocks = if format.is_quantized() { cols / format.block_len() } else { cols };
    let buf = be.ctx.buffer((words.len() * 4) as u64, "weight")?;
    be.ctx.queue.write_buffer(&buf.buf, 0, bytemuck::cast_slice(&words));
    let info = [cols as u32, blocks as u32, qh, d];
    Ok(Weight { storage: GpuWeight { buf, info }, format, rows, cols })
}

/// The kernels' layout of a weight: float formats keep their bytes (padded to a word);
/// quantized formats become three word-aligned sections, `qs` (the 16 or 32 quant bytes of each
/// block) | `qh` (Q5's high bits, a word per block) | scales (f16 pairs: `d` of two blocks per
/// word for Q4_0/Q5_0/Q8_0, `(d, m)` of one block per word for Q4_1/Q5_1). The sizes add up to
/// the GGUF bytes (up to padding). Returns the words and the qh and scale word offsets.
/// The k-quants have no layout (nor kernels) here yet: an `Unsupported` error.
fn repack(format: Format, src: &[u8]) -> Result<(Vec<u32>, u32, u32)> {
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let half = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]) as u32;
    // Every format named here, so a new one is a compile error until its layout is chosen.
    let (qs, qh, has_m) = match format {
        Format::F32 | Format::F16 | Format::BF16 => {
            let mut padded = src.to_vec();
            padded.resize(src.len().next_multiple_of(4), 0);
            return Ok((padded.chunks_exact(4).map(word).collect(), 0, 0));
        }
        Format::Q4_0 | Format::Q4_1 | Format::Q5_0 | Format::Q5_1 | Format::Q8_0 => {
            (format.field("qs"), format.field("qh"), format.field("dm").is_some())
        }
        Format::Q2_K | Format::Q3_K | Format::Q4_K | Format::Q5_K | Format::Q6_K => {
            return Err(Error::Unsupported {
                op: "upload_weight",
                backend: "wgpu",
                detail: format!(
                    "{} weights (its kernels are not written yet; the cpu backend runs them)",
                    format.name()
                ),
            });
        }
    };
    let blocks: Vec<&[u8]> = src.chunks_exact(format.block_bytes()).collect();
    // The block's fields (Format::fields): quants, Q5's fifth bits, and scales with or without m.
    let qs = qs.expect("legacy quantized formats have a qs field");
    let (qs_at, qs_len, qh_at) = (qs.start, qs.len(), qh.map(|f| f.start));
    let mut words: Vec<u32> = Vec::with_capacity(src.len() / 4 + 2);
    for b in &blocks {
        words.extend(b[qs_at..qs_at + qs_len].chunks_exact(4).map(word));
    }
    let qh = words.len() as u32;
    if let Some(at) = qh_at {
        words.extend(blocks.iter().map(|b| word(&b[at..at + 4])));
    }
    let d = words.len() as u32;
    if has_m {
        words.extend(blocks.iter().map(|b| half(b) | half(&b[2..]) << 16));
    } else {
        words.extend(blocks.chunks(2).map(|p| half(p[0]) | p.get(1).map_or(0, |b| half(b) << 16)));
    }
    // Whole vec4s: matmul_vec binds the buffer as array<vec4<u32>>.
    words.resize(words.len().next_multiple_of(4), 0);
    Ok((words, qh, d))
}

/// Host↔device transfers so far (write_* and read_* calls; weight uploads not counted).
pub fn transfer_count(be: &Wgpu) -> u64 {
    be.ctx.transfers.load(Ordering::Relaxed)
}
