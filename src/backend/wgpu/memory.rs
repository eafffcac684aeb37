//! Memory: tensors, host transfers (the only ones: write_*, read_*), and weight upload with the
//! repacking of ggml blocks into word-aligned sections the kernels read as u32 (`repack.rs`).

use std::sync::atomic::Ordering;

use super::Wgpu;
use super::context::GpuBuffer;
use super::repack::repack;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check, kv_q8};
use crate::error::{Error, Result};
use crate::quant::Format;

/// A weight on the device: one part, or several when it is larger than one buffer may be
/// (`Context::weight_part_bytes`, the adapter's binding limit by default). Kernels run once per part.
pub struct GpuWeight {
    pub parts: Vec<WeightPart>,
}

/// Rows `row0 .. row0 + rows` of a weight, repacked on their own (see `repack`).
pub struct WeightPart {
    pub row0: usize,
    pub rows: usize,
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
    if dtype == DType::F16 && !cols.is_multiple_of(2) {
        // Halves pair up in u32 words within a row (attention.rs): a row must not end mid-word.
        let detail = format!("f16 tensors of odd width ({cols}): the f16 KV cache needs an even kv_dim");
        return Err(Error::Unsupported { op: "alloc", backend: "wgpu", detail });
    }
    if dtype == DType::Q8_0 {
        kv_q8::check_width("alloc", "wgpu", cols)?;
    }
    let bytes = dtype.row_bytes(cols).and_then(|r| r.checked_mul(rows));
    let bytes = bytes.ok_or_else(|| Error::InvalidArgument(format!("alloc: [{rows}, {cols}] overflows")))?;
    let mut buf = be.ctx.buffer(bytes as u64, "tensor")?;
    buf.mirror = HostMirror::new(dtype, rows * cols);
    Ok(Tensor { buf, rows, cols, dtype })
}

pub fn write_f32(be: &Wgpu, dst: &mut Tensor<Wgpu>, data: &[f32]) -> Result<()> {
    if dst.dtype == DType::Q8_0 {
        // A q8_0 cache written from the host (tests): whole rows, quantized here (`kv_q8`).
        check::transfer("write_f32", dst, DType::Q8_0, data.len())?;
        whole_rows("write_f32", dst, data.len())?;
        return be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(&kv_q8::encode(data, dst.cols)));
    }
    if dst.dtype == DType::F16 {
        // An f16 cache written from the host (tests): rounded here; an odd count pads its last word.
        check::transfer("write_f32", dst, DType::F16, data.len())?;
        let mut halves: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
        if halves.len() % 2 == 1 {
            halves.push(half::f16::ZERO);
        }
        return be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(&halves));
    }
    check::transfer("write_f32", dst, DType::F32, data.len())?;
    be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(data))
}

/// A q8_0 tensor moves whole rows: its blocks and their scales are stored per row.
fn whole_rows(op: &'static str, t: &Tensor<Wgpu>, len: usize) -> Result<()> {
    if !len.is_multiple_of(t.cols) {
        return Err(Error::InvalidArgument(format!("{op}: {len} values are not whole rows of {} (q8_0)", t.cols)));
    }
    Ok(())
}

pub fn write_u32(be: &Wgpu, dst: &mut Tensor<Wgpu>, data: &[u32]) -> Result<()> {
    check::transfer("write_u32", dst, DType::U32, data.len())?;
    dst.buf.mirror.record(data);
    be.ctx.write_bytes(&dst.buf, bytemuck::cast_slice(data))
}

#[cfg(not(target_arch = "wasm32"))]
pub fn read_f32(be: &Wgpu, src: &Tensor<Wgpu>, out: &mut [f32]) -> Result<()> {
    if src.dtype == DType::Q8_0 {
        // A q8_0 cache read back (tests): whole rows of words, widened here.
        check::transfer("read_f32", src, DType::Q8_0, out.len())?;
        whole_rows("read_f32", src, out.len())?;
        let mut words = vec![0u32; out.len() / src.cols * kv_q8::row_words(src.cols)];
        be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(&mut words))?;
        kv_q8::decode(&words, src.cols, out);
        return Ok(());
    }
    if src.dtype == DType::F16 {
        // An f16 cache read back (tests): fetched as whole words of halves, widened here.
        check::transfer("read_f32", src, DType::F16, out.len())?;
        let mut halves = vec![half::f16::ZERO; out.len().next_multiple_of(2)];
        be.ctx.read_bytes(&src.buf, bytemuck::cast_slice_mut(&mut halves))?;
        out.iter_mut().zip(&halves).for_each(|(o, h)| *o = h.to_f32());
        return Ok(());
    }
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
    be.ctx.flush(&[])?;
    be.ctx.wait()
}

pub fn upload_weight(be: &Wgpu, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Wgpu>> {
    let src = bytes.bytes();
    let row_bytes = check::upload_weight(format, rows, cols, src.len())?;
    let per_part = part_rows(be.ctx.weight_part_bytes, format, row_bytes, rows)?;
    let parts = (0..rows.div_ceil(per_part).max(1))
        .map(|i| {
            let (row0, n) = (i * per_part, per_part.min(rows - i * per_part));
            let (words, part) = repack_part(format, cols, row0, n, &src[row0 * row_bytes..(row0 + n) * row_bytes]);
            let buf = be.ctx.buffer((words.len() * 4) as u64, "weight")?;
            be.ctx.queue.write_buffer(&buf.buf, 0, bytemuck::cast_slice(&words));
            Ok(part.with(buf))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Weight { storage: GpuWeight { parts }, format, rows, cols })
}

/// Rows per part of a weight on this adapter (`upload_weight`'s split, which streaming repeats).
pub(super) fn rows_per_part(be: &Wgpu, format: Format, rows: usize, cols: usize, bytes: usize) -> Result<usize> {
    let row_bytes = check::upload_weight(format, rows, cols, bytes)?;
    part_rows(be.ctx.weight_part_bytes, format, row_bytes, rows)
}

/// Rows per part: as even as the fewest parts of at most `limit` bytes (repacked) allow.
fn part_rows(limit: u64, format: Format, row_bytes: usize, rows: usize) -> Result<usize> {
    // Repacking pads each section to a word and the whole to a vec4.
    let slack = 4 * format.fields().len() as u64 + 16 + 16 + 64 + 4096; // + NF4's aligned level and pair tables
    let fit = (limit.saturating_sub(slack) / row_bytes.max(1) as u64) as usize;
    if fit == 0 {
        return Err(Error::Unsupported {
            op: "upload_weight",
            backend: "wgpu",
            detail: format!("one {} row of {row_bytes} bytes exceeds this adapter's buffer limits", format.name()),
        });
    }
    let parts = rows.div_ceil(fit).max(1);
    Ok(rows.div_ceil(parts).max(1))
}

/// One part's repacked words, and the part to make once they are in a buffer.
pub(super) fn repack_part(format: Format, cols: usize, row0: usize, rows: usize, src: &[u8]) -> (Vec<u32>, PartLayout) {
    let (words, fields) = repack(format, src);
    // Kernels address quantized rows in blocks of 32 values (a k-quant super-block is 8 of them).
    let blocks = if format.is_quantized() { cols / 32 } else { cols };
    let at = |name: &str| format.fields().iter().position(|f| f.name == name).map(|i| fields[i]);
    // The group-wise formats' header word: (d, z), absmax, or (D, c0, c1).
    let d = at("dm").or(at("d")).or(at("dz")).or(at("dc")).unwrap_or(0);
    let qh = at("qh").or(at("hmask")).unwrap_or(d);
    // The k-quants' packed scales, or NF4's level table (the section after the fields).
    let sc = at("scales").or(fields.get(format.fields().len()).copied()).unwrap_or(0);
    let info = [cols as u32, blocks as u32, qh, d, sc, 0, 0, 0];
    (words, PartLayout { row0, rows, info, fields })
}

/// A part without its buffer: what a streamed weight's host copy and ring slot share.
#[derive(Clone)]
pub(super) struct PartLayout {
    row0: usize,
    rows: usize,
    info: [u32; 8],
    fields: Vec<u32>,
}

impl PartLayout {
    pub(super) fn with(self, buf: GpuBuffer) -> WeightPart {
        WeightPart { row0: self.row0, rows: self.rows, buf, info: self.info, fields: self.fields }
    }
}

/// Host↔device transfers so far (write_* and read_* calls; weight uploads not counted).
pub fn transfer_count(be: &Wgpu) -> u64 {
    be.ctx.transfers.load(Ordering::Relaxed)
}
