//! CPU tensor and weight storage, plus the memory ops of the trait (alloc, write, read,
//! upload_weight). Tensors are plain vectors; weights stay in their GGUF bytes (usually a memory
//! map) and are dequantized a row at a time by the ops that read them, never copied whole.

use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::Format;

use super::Cpu;

/// One tensor's elements on the host.
pub enum CpuBuffer {
    F32(Vec<f32>),
    U32(Vec<u32>),
}

impl check::HostIndices for CpuBuffer {
    fn host_u32(&self) -> Option<&[u32]> {
        match self {
            CpuBuffer::U32(v) => Some(v),
            CpuBuffer::F32(_) => None,
        }
    }
}

/// A weight's GGUF bytes, used in place: `rows` rows of `row_bytes` bytes each.
pub struct CpuWeight {
    bytes: HostBytes,
    format: Format,
    rows: usize,
    cols: usize,
    row_bytes: usize,
}

impl CpuWeight {
    pub fn format(&self) -> Format {
        self.format
    }

    /// The bytes of row `r` (`r < rows`, checked by the caller through [`weight_bytes`]).
    pub fn row(&self, r: usize) -> &[u8] {
        &self.bytes.bytes()[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// The bytes of rows `r`, back to back (`r.end <= rows`, checked by the caller).
    pub fn rows(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.bytes.bytes()[r.start * self.row_bytes..r.end * self.row_bytes]
    }
}

/// A weight's storage, after checking that the `Weight`'s public fields still describe it.
pub fn weight_storage<'a>(op: &'static str, w: &'a Weight<Cpu>) -> Result<&'a CpuWeight> {
    let s = &w.storage;
    if (s.format, s.rows, s.cols) != (w.format, w.rows, w.cols) {
        return Err(Error::InvalidArgument(format!(
            "{op}: weight says {} [{}, {}] but its storage holds {} [{}, {}]",
            w.format.name(),
            w.rows,
            w.cols,
            s.format.name(),
            s.rows,
            s.cols
        )));
    }
    Ok(s)
}

fn dtype_error(op: &'static str, want: DType, t_dtype: DType, has: DType) -> Error {
    Error::InvalidArgument(format!("{op}: expected a {want:?} tensor, got one marked {t_dtype:?} holding {has:?}"))
}

fn check_len(op: &'static str, rows: usize, cols: usize, len: usize) -> Result<()> {
    if rows.checked_mul(cols) != Some(len) {
        return Err(Error::InvalidArgument(format!("{op}: tensor [{rows}, {cols}] holds {len} elements")));
    }
    Ok(())
}

/// The elements of an f32 tensor, or an error naming the op when it holds u32.
pub fn f32s<'a>(op: &'static str, t: &'a Tensor<Cpu>) -> Result<&'a [f32]> {
    match &t.buf {
        CpuBuffer::F32(v) if t.dtype == DType::F32 => check_len(op, t.rows, t.cols, v.len()).map(|()| v.as_slice()),
        CpuBuffer::F32(_) => Err(dtype_error(op, DType::F32, t.dtype, DType::F32)),
        CpuBuffer::U32(_) => Err(dtype_error(op, DType::F32, t.dtype, DType::U32)),
    }
}

/// The elements of an f32 tensor, mutably.
pub fn f32s_mut<'a>(op: &'static str, t: &'a mut Tensor<Cpu>) -> Result<&'a mut [f32]> {
    match &mut t.buf {
        CpuBuffer::F32(v) if t.dtype == DType::F32 => {
            check_len(op, t.rows, t.cols, v.len())?;
            Ok(v.as_mut_slice())
        }
        CpuBuffer::F32(_) => Err(dtype_error(op, DType::F32, t.dtype, DType::F32)),
        CpuBuffer::U32(_) => Err(dtype_error(op, DType::F32, t.dtype, DType::U32)),
    }
}

/// The elements of a u32 tensor.
pub fn u32s<'a>(op: &'static str, t: &'a Tensor<Cpu>) -> Result<&'a [u32]> {
    match &t.buf {
        CpuBuffer::U32(v) if t.dtype == DType::U32 => check_len(op, t.rows, t.cols, v.len()).map(|()| v.as_slice()),
        CpuBuffer::U32(_) => Err(dtype_error(op, DType::U32, t.dtype, DType::U32)),
        CpuBuffer::F32(_) => Err(dtype_error(op, DType::U32, t.dtype, DType::F32)),
    }
}

/// The elements of a u32 tensor, mutably.
pub fn u32s_mut<'a>(op: &'static str, t: &'a mut Tensor<Cpu>) -> Result<&'a mut [u32]> {
    match &mut t.buf {
        CpuBuffer::U32(v) if t.dtype == DType::U32 => {
            check_len(op, t.rows, t.cols, v.len())?;
            Ok(v.as_mut_slice())
        }
        CpuBuffer::U32(_) => Err(dtype_error(op, DType::U32, t.dtype, DType::U32)),
        CpuBuffer::F32(_) => Err(dtype_error(op, DType::U32, t.dtype, DType::F32)),
    }
}

/// A u32 index read from a device tensor, checked against `bound` (never trusted).
pub fn index(op: &'static str, what: &str, value: u32, bound: usize) -> Result<usize> {
    let i = value as usize;
    if i >= bound {
        return Err(Error::InvalidArgument(format!("{op}: {what} {value} is out of range (must be < {bound})")));
    }
    Ok(i)
}

pub fn alloc(dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Cpu>> {
    let len =
        rows.checked_mul(cols).ok_or_else(|| Error::InvalidArgument(format!("alloc: [{rows}, {cols}] overflows")))?;
    let buf = match dtype {
        DType::F32 => CpuBuffer::F32(vec![0.0; len]),
        DType::U32 => CpuBuffer::U32(vec![0; len]),
        DType::F16 => return Err(check::no_f16("cpu")),
        DType::Q8_0 => return Err(check::no_q8_cache("cpu")),
    };
    Ok(Tensor { buf, rows, cols, dtype })
}

fn too_long(op: &'static str, given: usize, len: usize) -> Error {
    Error::InvalidArgument(format!("{op}: {given} values do not fit a tensor of {len}"))
}

pub fn write_f32(dst: &mut Tensor<Cpu>, data: &[f32]) -> Result<()> {
    check::transfer("write_f32", dst, DType::F32, data.len())?;
    let dst = f32s_mut("write_f32", dst)?;
    let len = dst.len();
    dst.get_mut(..data.len()).ok_or_else(|| too_long("write_f32", data.len(), len))?.copy_from_slice(data);
    Ok(())
}

pub fn write_u32(dst: &mut Tensor<Cpu>, data: &[u32]) -> Result<()> {
    check::transfer("write_u32", dst, DType::U32, data.len())?;
    let dst = u32s_mut("write_u32", dst)?;
    let len = dst.len();
    dst.get_mut(..data.len()).ok_or_else(|| too_long("write_u32", data.len(), len))?.copy_from_slice(data);
    Ok(())
}

pub fn read_f32(src: &Tensor<Cpu>, out: &mut [f32]) -> Result<()> {
    check::transfer("read_f32", src, DType::F32, out.len())?;
    let src = f32s("read_f32", src)?;
    out.copy_from_slice(src.get(..out.len()).ok_or_else(|| too_long("read_f32", out.len(), src.len()))?);
    Ok(())
}

pub fn read_u32(src: &Tensor<Cpu>, out: &mut [u32]) -> Result<()> {
    check::transfer("read_u32", src, DType::U32, out.len())?;
    let src = u32s("read_u32", src)?;
    out.copy_from_slice(src.get(..out.len()).ok_or_else(|| too_long("read_u32", out.len(), src.len()))?);
    Ok(())
}

/// Keeps the GGUF bytes as they are (no copy): the CPU kernels read ggml's block layout directly.
pub fn upload_weight(format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Cpu>> {
    let row_bytes = check::upload_weight(format, rows, cols, bytes.bytes().len())?;
    let storage = CpuWeight { bytes, format, rows, cols, row_bytes };
    Ok(Weight { storage, format, rows, cols })
}
