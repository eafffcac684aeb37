//! Memory on CUDA: tensors (with the host mirror of their indices), host transfers (write_*,
//! read_*), and weight upload, which repacks ggml's blocks into separate aligned arrays.

use cudarc::driver::CudaSlice;

use super::context::Cuda;
use super::driver::driver;
use super::kernels;
use crate::backend::host_mirror::HostMirror;
use crate::backend::{DType, HostBytes, Tensor, Weight, check};
use crate::error::{Error, Result};
use crate::quant::Format;

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

/// A weight on the device: one array per field of its format's blocks (`Format::fields`, in that
/// order: quants, fifth bits, scales; a k-quant's several scale fields each get theirs), so each
/// is aligned for the kernels' wide loads. Float formats are one array, the values.
pub struct CudaWeight {
    pub fields: Vec<CudaSlice<u8>>,
    /// Passed where a kernel takes a field the format lacks (no thread reads it).
    empty: CudaSlice<u8>,
}

impl CudaWeight {
    /// The array of field `name` (the empty one if the format has no such field).
    pub fn field(&self, format: Format, name: &str) -> &CudaSlice<u8> {
        match format.fields().iter().position(|f| f.name == name) {
            Some(i) => &self.fields[i],
            None => &self.empty,
        }
    }

    /// (quants, fifth bits, scales) as the legacy-format kernels take them: `qs` (or the values of
    /// a float format), `qh`, and `d` or `dm`.
    pub fn qs_qh_dm(&self, format: Format) -> [&CudaSlice<u8>; 3] {
        let scales = if format.field("dm").is_some() { "dm" } else { "d" };
        let qs = if format.is_quantized() { "qs" } else { "value" };
        [self.field(format, qs), self.field(format, "qh"), self.field(format, scales)]
    }
}

pub fn alloc(cuda: &Cuda, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Cuda>> {
    // Both dtypes are 4 bytes an element.
    let dev = cuda.alloc_bytes(rows * cols * 4)?;
    Ok(Tensor { buf: CudaBuffer { dev, mirror: HostMirror::new(dtype, rows * cols) }, rows, cols, dtype })
}

pub fn write<T: bytemuck::Pod>(cuda: &Cuda, dst: &mut Tensor<Cuda>, op: &'static str, data: &[T]) -> Result<()> {
    let dtype = if op == "write_u32" { DType::U32 } else { DType::F32 };
    check::transfer(op, dst, dtype, data.len())?;
    let bytes: &[u8] = bytemuck::cast_slice(data);
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
    let dtype = if op == "read_u32" { DType::U32 } else { DType::F32 };
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

/// Splits the blocks into one array per field (`Format::fields`).
pub fn upload_weight(cuda: &Cuda, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Cuda>> {
    let src = bytes.bytes();
    check::upload_weight(format, rows, cols, src.len())?;
    if !kernels::has_kernels(format) {
        return Err(Error::Unsupported {
            op: "upload_weight",
            backend: "cuda",
            detail: format!("{} weights (its kernels are not written yet; the cpu backend runs them)", format.name()),
        });
    }
    let block = format.block_bytes();
    let fields = format
        .fields()
        .iter()
        .map(|f| {
            let mut out = Vec::with_capacity(src.len() / block * f.len() + 16);
            src.chunks_exact(block).for_each(|b| out.extend_from_slice(&b[f.start..f.end]));
            // matmul_mma reads f16 scales as aligned pairs: the last block's may reach past the end.
            out.extend_from_slice(&[0; 16]);
            cuda.upload_bytes(&out)
        })
        .collect::<Result<Vec<_>>>()?;
    let storage = CudaWeight { fields, empty: cuda.alloc_bytes(0)? };
    Ok(Weight { storage, format, rows, cols })
}
