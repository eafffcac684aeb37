//! The CUDA context: device, one stream, the NVRTC module cache, scratch buffers, and the memory
//! ops (alloc, read, write, weight upload with repacking). Every cudarc error becomes an
//! `Error` here, at the backend boundary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig};

use super::graph::Graphs;
use super::profile;
use super::source::Module;
use crate::backend::{DType, HostBytes, Tensor, Weight};
use crate::error::{Error, Result};
use crate::quant::Format;

/// The CUDA backend: one device, one stream; work queues until `sync` or a read.
pub struct Cuda {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    arch: &'static str,
    functions: Mutex<HashMap<(Module, &'static str), CudaFunction>>,
    modules: Mutex<HashMap<Module, Arc<CudaModule>>>,
    /// Activation quantization (int8 + scales) for the quantized GEMV.
    pub(super) q8_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K partial results of attention.
    pub(super) attn_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K completion counters of attention: zero between launches.
    pub(super) attn_counters: Mutex<Option<CudaSlice<u8>>>,
    /// Bumped whenever a scratch buffer moves (graphs that captured the old one are stale).
    pub(super) scratch_generation: AtomicU64,
    /// Recorded decode steps (CUDA graphs); off with `ULTRA_CUDA_GRAPHS=0`.
    pub(super) graphs: Mutex<Graphs>,
    pub(super) graphs_enabled: bool,
    /// Ops (and host writes, steps) so far: orders the reuse of quantized activations.
    op_count: AtomicU64,
    /// (x buffer, length) whose int8 planes the q8 scratch holds, and the op that wrote them.
    q8_key: Mutex<Option<((u64, usize), u64)>>,
    /// Per-op GPU times with `ULTRA_CUDA_PROFILE=1` (printed on drop).
    pub(super) profiler: Option<super::profile::Profiler>,
}

/// One tensor's device memory. u32 tensors also keep a host copy of what `write_u32` put there
/// (ids, positions, slots, block tables: small), so ops can reject out-of-range indices before
/// launching, without waiting for the device; `None` once the device writes the tensor (argmax).
pub struct CudaBuffer {
    pub dev: CudaSlice<u8>,
    pub(super) mirror: Option<Vec<u32>>,
}

/// A weight on the device, repacked into separate aligned arrays: quants (16-byte aligned
/// blocks), fifth bits (Q5 formats) and scales. Float formats keep their bytes in `qs`.
pub struct CudaWeight {
    pub qs: CudaSlice<u8>,
    pub qh: CudaSlice<u8>,
    pub dm: CudaSlice<u8>,
}

pub(super) fn driver(e: DriverError) -> Error {
    Error::Device { backend: "cuda", detail: e.to_string() }
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable { backend: "cuda", reason: reason.into() }
}

impl Cuda {
    /// Opens device `ordinal`; `DeviceUnavailable` (never a panic) without a driver or a GPU.
    pub fn new(ordinal: usize) -> Result<Cuda> {
        // SAFETY: only probes for libcuda; cudarc panics on first use when it is missing.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(unavailable("libcuda (the NVIDIA driver) was not found"));
        }
        if !super::source::nvrtc_present() {
            return Err(unavailable("libnvrtc (the CUDA runtime compiler) was not found"));
        }
        let count = CudaContext::device_count().map_err(|e| unavailable(e.to_string()))?;
        if ordinal >= count.max(0) as usize {
            return Err(unavailable(format!("no CUDA device {ordinal} ({count} found)")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable(e.to_string()))?;
        // SAFETY: one stream only, so no cross-stream synchronization is needed.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(driver)?;
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let stream = ctx.new_stream().map_err(driver)?;
        Ok(Cuda {
            ctx,
            stream,
            arch,
            functions: Mutex::default(),
            modules: Mutex::default(),
            q8_scratch: Mutex::default(),
            attn_scratch: Mutex::default(),
            attn_counters: Mutex::default(),
            scratch_generation: AtomicU64::new(0),
            graphs: Mutex::default(),
            graphs_enabled: std::env::var("ULTRA_CUDA_GRAPHS").map_or(true, |v| v != "0") && !profile::requested(),
            op_count: AtomicU64::new(0),
            q8_key: Mutex::default(),
            profiler: profile::requested().then(super::profile::Profiler::default),
        })
    }

    /// Turns the recording of decode steps as CUDA graphs on or off (on by default, unless
    /// `ULTRA_CUDA_GRAPHS=0`): off, every step launches its kernels one by one.
    pub fn set_graphs(&mut self, on: bool) {
        self.graphs_enabled = on;
    }

    /// Device name, compute capability and memory, for `ultra info`.
    pub fn describe(&self) -> Result<String> {
        let name = self.ctx.name().map_err(driver)?;
        let (free, total) = self.ctx.mem_get_info().map_err(driver)?;
        let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
        Ok(format!("{name}, compute capability {}, {:.1} GiB ({:.1} GiB free)", &self.arch[3..], gib(total), gib(free)))
    }

    /// Marks the start of an op (or of anything else that may write device memory).
    pub(super) fn next_op(&self) {
        self.op_count.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the q8 scratch holds the quantized planes of buffer `key`, written by this op or
    /// the one just before it (so nothing has written x or the scratch since).
    pub(super) fn q8_holds(&self, key: (u64, usize)) -> bool {
        let now = self.op_count.load(Ordering::Relaxed);
        matches!(*lock(&self.q8_key), Some((k, op)) if k == key && now.wrapping_sub(op) <= 1)
    }

    /// Records that the current op left the planes of buffer `key` in the q8 scratch.
    pub(super) fn q8_quantized(&self, key: (u64, usize)) {
        *lock(&self.q8_key) = Some((key, self.op_count.load(Ordering::Relaxed)));
    }

    /// The kernel `entry` of `module`, compiled with NVRTC for this device on first use.
    pub(super) fn function(&self, module: Module, entry: &'static str) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(&(module, entry)) {
            return Ok(f.clone());
        }
        let loaded = lock(&self.modules).get(&module).cloned();
        let loaded = match loaded {
            Some(m) => m,
            None => {
                let m = self.ctx.load_module(module.compile(self.arch)?).map_err(driver)?;
                lock(&self.modules).insert(module, m.clone());
                m
            }
        };
        let f = loaded.load_function(entry).map_err(driver)?;
        lock(&self.functions).insert((module, entry), f.clone());
        Ok(f)
    }

    pub(super) fn alloc_bytes(&self, n: usize) -> Result<CudaSlice<u8>> {
        self.stream.alloc_zeros::<u8>(n.max(16)).map_err(driver)
    }

    pub(super) fn upload_bytes(&self, bytes: &[u8]) -> Result<CudaSlice<u8>> {
        let mut buf = self.alloc_bytes(bytes.len())?;
        if !bytes.is_empty() {
            self.stream.memcpy_htod(bytes, &mut buf.slice_mut(..bytes.len())).map_err(driver)?;
        }
        Ok(buf)
    }

    /// A scratch buffer of at least `n` bytes (grown, never shrunk; the old one is freed in stream order).
    pub(super) fn scratch<'a>(
        &self,
        slot: &'a Mutex<Option<CudaSlice<u8>>>,
        n: usize,
    ) -> Result<MutexGuard<'a, Option<CudaSlice<u8>>>> {
        let mut guard = lock(slot);
        if guard.as_ref().is_none_or(|b| b.len() < n) {
            *guard = Some(self.alloc_bytes(n.next_power_of_two())?);
            self.scratch_generation.fetch_add(1, Ordering::Relaxed);
        }
        Ok(guard)
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A 1-D launch of one thread per element.
pub(super) fn grid_1d(n: u64, block: u32) -> Result<LaunchConfig> {
    let blocks = n.div_ceil(block as u64).max(1);
    if blocks > i32::MAX as u64 {
        return Err(Error::InvalidArgument(format!("{n} elements exceed one CUDA launch")));
    }
    Ok(LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 })
}

fn dtype_size(_: DType) -> usize {
    4
}

pub fn alloc(cuda: &Cuda, dtype: DType, rows: usize, cols: usize) -> Result<Tensor<Cuda>> {
    let dev = cuda.alloc_bytes(rows * cols * dtype_size(dtype))?;
    let mirror = (dtype == DType::U32).then(|| vec![0; rows * cols]);
    Ok(Tensor { buf: CudaBuffer { dev, mirror }, rows, cols, dtype })
}

fn check_len(op: &'static str, t: &Tensor<Cuda>, dtype: DType, n: usize) -> Result<()> {
    if t.dtype != dtype || n > t.len() {
        return Err(Error::Shape { op, expected: vec![n], got: vec![t.rows, t.cols] });
    }
    Ok(())
}

pub fn write<T: bytemuck::Pod>(cuda: &Cuda, dst: &mut Tensor<Cuda>, dtype: DType, data: &[T]) -> Result<()> {
    check_len("write", dst, dtype, data.len())?;
    let bytes: &[u8] = bytemuck::cast_slice(data);
    if bytes.is_empty() {
        return Ok(());
    }
    cuda.stream.memcpy_htod(bytes, &mut dst.buf.dev.slice_mut(..bytes.len())).map_err(driver)
}

/// dst[..data.len()] = data for a u32 tensor, kept in its host mirror too.
pub fn write_u32(cuda: &Cuda, dst: &mut Tensor<Cuda>, data: &[u32]) -> Result<()> {
    write(cuda, dst, DType::U32, data)?;
    if let Some(mirror) = &mut dst.buf.mirror {
        mirror[..data.len()].copy_from_slice(data);
    }
    Ok(())
}

/// Err if any host-mirrored value of the u32 tensor `t` is ≥ `limit` (an index out of range).
/// Tensors the device wrote (no mirror) pass; their kernels' own guards still apply.
pub(super) fn expect_below(op: &'static str, what: &str, t: &Tensor<Cuda>, limit: usize) -> Result<()> {
    match t.buf.mirror.as_ref().and_then(|m| m.iter().find(|&&v| v as usize >= limit)) {
        Some(v) => Err(Error::InvalidArgument(format!("{op}: {what} {v} out of range (< {limit})"))),
        None => Ok(()),
    }
}

pub fn read<T: bytemuck::Pod>(cuda: &Cuda, src: &Tensor<Cuda>, dtype: DType, out: &mut [T]) -> Result<()> {
    check_len("read", src, dtype, out.len())?;
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    if !bytes.is_empty() {
        cuda.stream.memcpy_dtoh(&src.buf.dev.slice(..bytes.len()), bytes).map_err(driver)?;
    }
    cuda.stream.synchronize().map_err(driver)
}

pub fn sync(cuda: &Cuda) -> Result<()> {
    cuda.stream.synchronize().map_err(driver)
}

/// Byte ranges of one GGUF block: (scales d [and m], fifth bits, quants).
fn block_parts(format: Format) -> (std::ops::Range<usize>, std::ops::Range<usize>, std::ops::Range<usize>) {
    match format {
        Format::Q4_0 => (0..2, 0..0, 2..18),
        Format::Q4_1 => (0..4, 0..0, 4..20),
        Format::Q5_0 => (0..2, 2..6, 6..22),
        Format::Q5_1 => (0..4, 4..8, 8..24),
        Format::Q8_0 => (0..2, 0..0, 2..34),
        Format::F32 | Format::F16 | Format::BF16 => (0..0, 0..0, 0..format.block_bytes()),
    }
}

pub fn upload_weight(cuda: &Cuda, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<Weight<Cuda>> {
    let src = bytes.bytes();
    let expected =
        format.row_bytes(cols)?.checked_mul(rows).ok_or_else(|| Error::InvalidArgument("weight too large".into()))?;
    if src.len() != expected {
        return Err(Error::Shape { op: "upload_weight", expected: vec![expected], got: vec![src.len()] });
    }
    let storage = if !format.is_quantized() {
        CudaWeight { qs: cuda.upload_bytes(src)?, qh: cuda.alloc_bytes(0)?, dm: cuda.alloc_bytes(0)? }
    } else {
        let (d, h, q) = block_parts(format);
        let n_blocks = src.len() / format.block_bytes();
        let (mut dm, mut qh, mut qs) = (
            Vec::with_capacity(n_blocks * d.len()),
            Vec::with_capacity(n_blocks * h.len()),
            Vec::with_capacity(n_blocks * q.len()),
        );
        for b in src.chunks_exact(format.block_bytes()) {
            dm.extend_from_slice(&b[d.clone()]);
            qh.extend_from_slice(&b[h.clone()]);
            qs.extend_from_slice(&b[q.clone()]);
        }
        // matmul_mma reads f16 scales as aligned pairs: the last block's pair may reach past the end.
        dm.extend_from_slice(&[0; 16]);
        CudaWeight { qs: cuda.upload_bytes(&qs)?, qh: cuda.upload_bytes(&qh)?, dm: cuda.upload_bytes(&dm)? }
    };
    Ok(Weight { storage, format, rows, cols })
}
