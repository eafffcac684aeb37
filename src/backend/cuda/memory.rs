//! Memory on CUDA: tensors (with the host mirror of their indices), host transfers (write_*,
//! read_*), and weight upload, which repacks ggml's blocks into separate aligned arrays.

use cudarc::driver::CudaSlice;

use super::context::Cuda;
use super::driver::driver;
use super::kernels;
use super::repack;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::{BlockField, Format};

/// One tensor's device memory, and what the host knows of its u32 values (`HostMirror`).
pub struct CudaBuffer {
    pub dev: CudaSlice<u8>,
    pub(super) mirror: HostMirror,
}

impl check::HostIndices for CudaBuffer {
    fn host_u32(&self) -> Option<&[u32]> {
        self.mirror.get()
    }
}

/// A weight on the device: one named array per field of its format's blocks (`Format::fields`, in
/// that order: quants, fifth bits, scales), so each is aligned for the kernels' wide loads. Float
/// formats are one array, the values. k-quants are rearranged into 32-value blocks first
/// (`repack.rs`): `qs`, `qh` (if the format has high bits) and `dm` (each super-block's scales);
/// the group-wise formats likewise into `qs` and `dm` (each block's header).
pub struct CudaWeight {
    pub fields: Vec<(&'static str, CudaSlice<u8>)>,
    /// Passed where a kernel takes a field the format lacks (no thread reads it).
    empty: CudaSlice<u8>,
}

impl CudaWeight {
    pub(super) fn new(fields: Vec<(&'static str, CudaSlice<u8>)>, cuda: &Cuda) -> Result<CudaWeight> {
        Ok(CudaWeight { fields, empty: cuda.alloc_bytes(0)? })
    }

    /// The array named `name` (the empty one if the weight has no such array).
    pub fn field(&self, name: &str) -> &CudaSlice<u8> {
        self.fields.iter().find(|(n, _)| *n == name).map_or(&self.empty, |(_, a)| a)
    }

    /// (quants, high bits, scales) as the kernels take them: `qs` (or the values of a float
    /// format), `qh`, and `d` or `dm`.
    pub fn qs_qh_dm(&self) -> [&CudaSlice<u8>; 3] {
        let has = |name: &str| self.fields.iter().any(|(n, _)| *n == name);
        let qs = if has("value") { "value" } else { "qs" };
        let scales = if has("d") { "d" } else { "dm" };
        [self.field(qs), self.field("qh"), self.field(scales)]
    }
}

pub fn alloc(cuda: &Cuda, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Cuda>> {
    if dtype == DType::Q8_0 {
        return Err(check::no_q8_cache("cuda"));
    }
    let bytes = dtype.row_bytes(cols).and_then(|r| r.checked_mul(rows));
    let bytes = bytes.ok_or_else(|| Error::InvalidArgument(format!("alloc: [{rows}, {cols}] overflows")))?;
    let dev = cuda.alloc_bytes(bytes)?;
    Ok(Tensor { buf: CudaBuffer { dev, mirror: HostMirror::new(dtype, rows * cols) }, rows, cols, dtype })
}

pub fn write<T: bytemuck::Pod>(cuda: &Cuda, dst: &mut Tensor<Cuda>, op: &'static str, data: &[T]) -> Result<()> {
    let dtype = if op == "write_u32" { DType::U32 } else { DType::F32 };
    if dst.dtype == DType::F16 && dtype == DType::F32 {
        // An f16 cache written from the host (tests): rounded here, so the device copy is plain bytes.
        check::transfer(op, dst, DType::F16, data.len())?;
        let values: &[f32] = bytemuck::try_cast_slice(data)
            .map_err(|e| Error::InvalidArgument(format!("{op}: f16 tensors take f32 values ({e})")))?;
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        return write_bytes(cuda, dst, bytemuck::cast_slice(&halves));
    }
    check::transfer(op, dst, dtype, data.len())?;
    write_bytes(cuda, dst, bytemuck::cast_slice(data))
}

fn write_bytes(cuda: &Cuda, dst: &mut Tensor<Cuda>, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    cuda.stream.memcpy_htod(bytes, &mut dst.buf.dev.slice_mut(..bytes.len())).map_err(driver)
}

/// dst[..data.len()] = data for a u32 tensor, kept in its host mirror too.
pub fn write_u32(cuda: &Cuda, dst: &mut Tensor<Cuda>, data: &[u32]) -> Result<()> {
    write(cuda, dst, "write_u32", data)?;
    dst.buf.mirror.record(data);
    Ok(())
}

pub fn read<T: bytemuck::Pod>(cuda: &Cuda, src: &Tensor<Cuda>, op: &'static str, out: &mut [T]) -> Result<()> {
    let dtype = match op {
        "read_u32" => DType::U32,
        "read_f16" => DType::F16,
        _ => DType::F32,
    };
    if src.dtype == DType::F16 && dtype == DType::F32 {
        // An f16 cache read back (tests): fetched as halves, widened here.
        check::transfer(op, src, DType::F16, out.len())?;
        let mut halves = vec![half::f16::ZERO; out.len()];
        read(cuda, src, "read_f16", &mut halves)?;
        let out: &mut [f32] = bytemuck::try_cast_slice_mut(out)
            .map_err(|e| Error::InvalidArgument(format!("{op}: f16 tensors read as f32 ({e})")))?;
        out.iter_mut().zip(&halves).for_each(|(o, h)| *o = h.to_f32());
        return Ok(());
    }
    check::transfer(op, src, dtype, out.len())?;
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    if !bytes.is_empty() {
        cuda.stream.memcpy_dtoh(&src.buf.dev.slice(..bytes.len()), bytes).map_err(driver)?;
    }
    cuda.stream.synchronize().map_err(driver)
}

pub fn sync(cuda: &Cuda) -> Result<()> {
    cuda.stream.synchronize().map_err(driver)
}

/// Splits the blocks into one array per field (`Format::fields`); k-quants as `repack.rs` lays them out.
pub fn upload_weight(cuda: &Cuda, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Cuda>> {
    let fields = device_arrays(format, rows, cols, &bytes)?
        .into_iter()
        .map(|(name, bytes)| Ok((name, cuda.upload_bytes(&bytes)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Weight { storage: CudaWeight::new(fields, cuda)?, format, rows, cols })
}

/// The arrays a weight is on the device (`CudaWeight`), built on the host: what `upload_weight`
/// uploads and what `host_weight` keeps in page-locked memory for streaming.
pub(super) fn device_arrays(
    format: Format,
    rows: usize,
    cols: usize,
    bytes: &HostBytes,
) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let src = bytes.bytes();
    check::upload_weight(format, rows, cols, src.len())?;
    if !kernels::has_kernels(format) {
        return Err(Error::Unsupported {
            op: "upload_weight",
            backend: "cuda",
            detail: format!("{} weights (no kernels for them yet; the cpu backend runs them)", format.name()),
        });
    }
    let mut arrays: Vec<(&'static str, Vec<u8>)> = if let Format::Intn(f) = format {
        let (qs, dm) = repack::repack_intn(f, src);
        vec![("qs", qs), ("dm", dm)]
    } else if format.is_kquant() {
        let r = repack::repack(format, src);
        let mut arrays = vec![("qs", r.qs), ("dm", r.dm)];
        if !r.qh.is_empty() {
            arrays.push(("qh", r.qh));
        }
        arrays
    } else {
        let block = format.block_bytes();
        let field = |f: &BlockField| src.chunks_exact(block).flat_map(|b| &b[f.start..f.end]).copied().collect();
        format.fields().iter().map(|f| (f.name, field(f))).collect()
    };
    // matmul_mma reads f16 scales as aligned pairs: the last block's may reach past the end.
    arrays.iter_mut().for_each(|(_, bytes)| bytes.extend_from_slice(&[0; 16]));
    Ok(arrays)
}
