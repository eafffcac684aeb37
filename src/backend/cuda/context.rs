//! The CUDA context: device, one stream, the NVRTC module cache, scratch buffers, and the memory
//! ops (alloc, read, write, weight upload with repacking). Every cudarc error becomes an
//! `Error` here, at the backend boundary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig};

use super::driver::driver;
use super::graph::{Graphs, Pdl};
use super::kernels::Module;
use super::profile;

use crate::error::{Error, Result};

/// The CUDA backend: one device, one stream; work queues until `sync` or a read.
pub struct Cuda {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    /// Copies of streamed weights (`offload.rs`), ordered against `stream` by events.
    pub(super) copy_stream: Arc<CudaStream>,
    /// A streamed weight lives in pageable memory: its copies cannot be captured, so no graphs.
    pub(super) pageable: std::sync::atomic::AtomicBool,
    arch: &'static str,
    functions: Mutex<HashMap<(Module, &'static str), CudaFunction>>,
    modules: Mutex<HashMap<Module, Arc<CudaModule>>>,
    /// Activation quantization (int8 + scales) for the quantized GEMV.
    pub(super) q8_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K partial results of attention.
    pub(super) attn_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K completion counters of attention: zero between launches.
    pub(super) attn_counters: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K partial tiles of matmul_mma.
    pub(super) mma_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// Split-K completion counters of matmul_mma, one per output tile: zero between launches.
    pub(super) mma_counters: Mutex<Option<CudaSlice<u8>>>,
    /// Streaming multiprocessors: how many blocks fill the device (split-K sizes).
    pub(super) sm_count: u32,
    /// Bumped whenever a scratch buffer moves (graphs that captured the old one are stale).
    pub(super) scratch_generation: AtomicU64,
    /// Recorded decode steps (CUDA graphs); off with `ULTRA_CUDA_GRAPHS=0`.
    pub(super) graphs: Mutex<Graphs>,
    pub(super) graphs_enabled: bool,
    /// Per-op GPU times with `ULTRA_CUDA_PROFILE=1` (printed on drop).
    pub(super) profiler: Option<super::profile::Profiler>,
    /// Which fused decode launches run (`ULTRA_CUDA_FUSE`).
    pub(super) fusions: Fusions,
}

/// Which of the decode step's fused launches run: `ULTRA_CUDA_FUSE` is a comma list of `norm` (the
/// norm writes xn's int8 planes), `rope` (rope of q and k and the cache write in one launch) and
/// `attn` (flash-decoding writes att's planes), or `none`; by default `rope,attn` (`DEFAULT`). An op
/// whose fusion is off runs as its separate launches: for A/B timing and to find which fusion a wrong
/// result comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusions {
    pub norm: bool,
    pub rope: bool,
    pub attn: bool,
}

impl Fusions {
    pub const ALL: Fusions = Fusions { norm: true, rope: true, attn: true };
    /// Without the norm's: on an H100 it alone made llama-8b decode 5% slower, while rope and attn
    /// together made the three shapes 4–11% faster (benches/notes/cuda.md v30).
    pub const DEFAULT: Fusions = Fusions { norm: false, rope: true, attn: true };

    /// The fusions a `ULTRA_CUDA_FUSE` value names (None: unset, `DEFAULT`); an unknown name is an error.
    pub fn parse(value: Option<&str>) -> Result<Fusions> {
        let Some(value) = value else { return Ok(Fusions::DEFAULT) };
        let mut f = Fusions { norm: false, rope: false, attn: false };
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "norm" => f.norm = true,
                "rope" => f.rope = true,
                "attn" => f.attn = true,
                "none" => {}
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "ULTRA_CUDA_FUSE: unknown fusion {other:?} (norm, rope, attn or none)"
                    )));
                }
            }
        }
        Ok(f)
    }
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
        if !super::kernels::nvrtc_present() {
            return Err(unavailable("libnvrtc (the CUDA runtime compiler) was not found"));
        }
        let count = CudaContext::device_count().map_err(|e| unavailable(e.to_string()))?;
        if ordinal >= count.max(0) as usize {
            return Err(unavailable(format!("no CUDA device {ordinal} ({count} found)")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable(e.to_string()))?;
        // SAFETY: the compute stream and the copy stream of streamed weights are ordered by the
        // events `offload.rs` records; no buffer is shared between them otherwise.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(driver)?;
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let stream = ctx.new_stream().map_err(driver)?;
        let copy_stream = ctx.new_stream().map_err(driver)?;
        let sm_count = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver)?
            .max(1) as u32;
        Ok(Cuda {
            ctx,
            stream,
            copy_stream,
            pageable: Default::default(),
            arch,
            functions: Mutex::default(),
            modules: Mutex::default(),
            q8_scratch: Mutex::default(),
            attn_scratch: Mutex::default(),
            attn_counters: Mutex::default(),
            mma_scratch: Mutex::default(),
            mma_counters: Mutex::default(),
            sm_count,
            scratch_generation: AtomicU64::new(0),
            graphs: Mutex::new(Graphs::new(if major >= 9 { Pdl::from_env() } else { Pdl::Off })),
            graphs_enabled: std::env::var("ULTRA_CUDA_GRAPHS").map_or(true, |v| v != "0") && !profile::requested(),
            profiler: profile::requested().then(super::profile::Profiler::default),
            fusions: Fusions::parse(std::env::var("ULTRA_CUDA_FUSE").ok().as_deref())?,
        })
    }

    /// This backend with exactly `fusions` running, whatever `ULTRA_CUDA_FUSE` says (the op table
    /// checks every fusion this way, default or not).
    pub fn with_fusions(mut self, fusions: Fusions) -> Cuda {
        self.fusions = fusions;
        self
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

    /// The kernel `entry` of `module`, compiled with NVRTC for this device on first use.
    pub(super) fn function(&self, module: Module, entry: &'static str) -> Result<CudaFunction> {
        if !module.entries().contains(&entry) {
            return Err(Error::Device {
                backend: "cuda",
                detail: format!("{entry} is not a kernel of {}", module.name()),
            });
        }
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

#[cfg(test)]
mod tests {
    use super::Fusions;

    #[test]
    fn fuse_lists_name_their_fusions() {
        assert_eq!(Fusions::parse(None).unwrap(), Fusions::DEFAULT);
        let none = Fusions { norm: false, rope: false, attn: false };
        assert_eq!(Fusions::parse(Some("none")).unwrap(), none);
        assert_eq!(Fusions::parse(Some("")).unwrap(), none);
        assert_eq!(Fusions::parse(Some("rope, attn")).unwrap(), Fusions { rope: true, attn: true, ..none });
        assert_eq!(Fusions::parse(Some("norm,rope,attn")).unwrap(), Fusions::ALL);
        let e = Fusions::parse(Some("norm,qkv")).unwrap_err().to_string();
        assert!(e.contains("ULTRA_CUDA_FUSE") && e.contains("qkv"), "{e}");
    }
}
