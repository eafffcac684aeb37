//! The wgpu device: instance, adapter, device and queue; the pipeline and bind-group caches; the
//! pending command list that ops record into and that `flush` turns into one command encoder and
//! one submission; the per-dispatch parameter arena; readback staging; the transfer counter.
//!
//! Parameters: each dispatch appends its small parameter struct to a host arena at its own
//! aligned offset; `flush` uploads the arena once and binds each dispatch's slice with a dynamic
//! offset, so parameters recorded in one submission never clobber each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::kernels::Variant;
use super::profile::{PROFILED, Profiler};
use crate::backend::check;
use crate::backend::host_mirror::HostMirror;
use crate::error::{Error, Result};

/// Bytes of the parameter arena (one submission's worth; a longer recording flushes early).
const ARENA_BYTES: u64 = 1 << 20;
/// Bytes of one dispatch's parameters as bound (every Params struct fits: matmul_vec_parts' is the
/// largest, three weight geometries and two vec4s).
const PARAMS_BYTES: u64 = 128;
/// Dispatches per submission on GPU adapters (`Options::submit_every`): the best of 32 and 128 on the
/// H100 (benches/notes/wgpu.md, v13).
const SUBMIT_EVERY: usize = 32;
/// Weight values (k · n) from which GPU adapters run the quantized GEMV on int8 activations by default:
/// 2048 × 2048. Below it the quantize dispatch cost more than the integer products saved (H100:
/// SmolLM2's 576-wide layers decoded 343 → 267 tok/s with every GEMV on int8; benches/notes/wgpu.md v15).
const INT8_MIN_VALUES: usize = 2048 * 2048;
/// Weight values (k · n) from which matmuls on cooperative matrices decode the weight to f16 once
/// (matmul_coop16) by default: 2048 × 2048. On an H100 at pp512 SmolLM2's 576-wide layers ran 13%
/// slower so, llama-1b's 7% and llama-8b's 32% faster (benches/notes/wgpu.md v20).
const COOP16_MIN_VALUES: usize = 2048 * 2048;
/// Bind groups kept before the cache is cleared (buffer ids are never reused, so stale entries
/// only hold memory).
const MAX_BIND_GROUPS: usize = 4096;
/// Storage bindings of the widest kernel (rope_kv_write's 8), the size of the bind-group cache key.
const MAX_BINDINGS: usize = 8;
/// How long `wait` lets the device run before calling it hung (an error, never a stall).
const WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Which optional device features to leave unused (`ULTRA_WGPU_DISABLE=subgroups,f16`; `solo`: the
/// GPU's GEMV teams on a CPU adapter too), how many blocks a GEMV lane loads at once
/// (`ULTRA_WGPU_VEC_UNROLL=1|2|4`), and
/// whether to keep the batch-invariance promise (`ULTRA_WGPU_BATCH_INVARIANT=1`), and the largest
/// part a weight is uploaded in (`ULTRA_WGPU_WEIGHT_PART=<bytes>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub disable_subgroups: bool,
    pub disable_f16: bool,
    /// Run every matmul through the GEMV kernels, whose per-row order does not depend on m, so a
    /// row's result is bit-identical whatever the batch (prefill is several times slower).
    pub batch_invariant: bool,
    /// Bytes of the largest buffer one part of a weight may take (never more than the adapter's
    /// binding and buffer limits; None: those limits). A weight larger than that is uploaded as
    /// row ranges, one buffer each (`GpuWeight::parts`); tests set it small to exercise the split.
    pub weight_part_bytes: Option<u64>,
    /// Run the quantized GEMV in subgroup (or shared-memory) teams even on a CPU adapter, where it
    /// would take one-lane teams: how lavapipe tests the GPU's kernel shapes.
    pub disable_solo: bool,
    /// Run silu_mul_matmul as one `matmul_vec_silu` dispatch where it can (`ULTRA_WGPU_SILU_FUSION=1`):
    /// off by default, as the two dispatches were 5–11% faster at decode on the H100
    /// (benches/notes/wgpu.md v14); the op table turns it on so that the kernel stays checked.
    pub silu_fusion: bool,
    /// Blocks per lane the quantized GEMV loads before computing on them (1, 2 or 4; None: the
    /// planner's choice). The sums and their order do not depend on it.
    pub vec_unroll: Option<u32>,
    /// Leave x out of workgroup memory in one-row quantized GEMVs (`ULTRA_WGPU_STAGE_X=0`; staged
    /// by default where lanes work in teams: 1–7% faster decode on the H100, the same bits).
    pub disable_stage_x: bool,
    /// Submit the recorded dispatches every this many, so the GPU starts on a step's first layers
    /// while the host records the rest. None (the default): every SUBMIT_EVERY on GPU adapters,
    /// once per flush on CPU adapters (whose queue shares the host's cores); Some(0): once per flush.
    pub submit_every: Option<usize>,
    /// Run quantized matmuls of m ≥ 64 on cooperative matrices (`matmul_coop.wgsl`) where the
    /// adapter has f16 × f16 → f32 ones (wgpu's experimental feature). None (the default): on
    /// discrete and integrated Vulkan GPUs, the adapters it was checked and timed on (NVIDIA; Mesa's
    /// lavapipe is checked but is a CPU); Some(true) also elsewhere (Metal's simdgroup matrices, CPU
    /// adapters), Some(false) never (`ULTRA_WGPU_COOPMAT=1` / `0`).
    pub coopmat: Option<bool>,
    /// Where matmuls run on cooperative matrices, decode the weight to f16 once per call
    /// (`dequant_f16.wgsl`) and x too (`to_f16.wgsl`), then multiply with `matmul_coop16.wgsl`,
    /// which reads both operands straight from storage, instead of decoding each tile's weight and
    /// x slabs into workgroup memory per step of k. None (the default): for weights of at least
    /// COOP16_MIN_VALUES values (on an H100 SmolLM2's 576-wide ones ran slower so, llama-1b's and
    /// llama-8b's faster: benches/notes/wgpu.md v20); Some(true) for every such matmul, Some(false)
    /// for none (`ULTRA_WGPU_COOP_DEQUANT=1` / `0`).
    pub coop_dequant: Option<bool>,
    /// Run the quantized GEMV (m < 64) on int8 activations where the format allows it
    /// (`kernels::int8_gemv`): x quantized to 32-value int8 blocks (`q8_blocks.wgsl`: one quantize_q8
    /// dispatch per x, or silu_mul_q8 for the down projection) and integer dot products, as
    /// llama.cpp's MMVQ and our cuda GEMV. None (the default): on GPU adapters for weights of at
    /// least INT8_MIN_VALUES values (smaller ones gain less than the extra dispatch costs), off on
    /// CPU adapters and in browsers; Some(true) for every such GEMV, Some(false) for none
    /// (`ULTRA_WGPU_INT8=1` / `0`).
    pub int8_gemv: Option<bool>,
    /// Run split-K decode attention's first pass with K and V read straight from storage into
    /// registers (`attention_direct.wgsl`) instead of staged through workgroup memory
    /// (`attention.wgsl`). Its order of sums is not the tiled kernel's, so never with
    /// `batch_invariant`. None (the default): on GPU adapters; Some(true) also on CPU adapters (how
    /// lavapipe checks it); Some(false) never (`ULTRA_WGPU_ATTN_DIRECT=1` / `0`).
    pub attn_direct: Option<bool>,
    /// Run the int8-writing add + RMSNorm of one decode row over several workgroups
    /// (`add_rms_norm_split.wgsl`, the same bits) instead of one (`ULTRA_WGPU_NORM_SPLIT=1`).
    /// Off by default: not yet timed on a GPU.
    pub norm_split: bool,
}

impl Options {
    /// Options from `ULTRA_WGPU_DISABLE` (a comma-separated list of `subgroups`, `f16`, `solo`),
    /// `ULTRA_WGPU_INT8` (`1` / `0`),
    /// `ULTRA_WGPU_BATCH_INVARIANT` (`1` to keep batch invariance) and `ULTRA_WGPU_WEIGHT_PART`
    /// (bytes).
    pub fn from_env() -> Options {
        let list = std::env::var("ULTRA_WGPU_DISABLE").unwrap_or_default();
        let has = |w: &str| list.split(',').any(|x| x.trim().eq_ignore_ascii_case(w));
        let batch_invariant = std::env::var("ULTRA_WGPU_BATCH_INVARIANT").as_deref() == Ok("1");
        let weight_part_bytes = std::env::var("ULTRA_WGPU_WEIGHT_PART").ok().and_then(|v| v.trim().parse().ok());
        let vec_unroll = std::env::var("ULTRA_WGPU_VEC_UNROLL").ok().and_then(|v| v.trim().parse().ok());
        let coopmat = match std::env::var("ULTRA_WGPU_COOPMAT").as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        };
        let int8_gemv = match std::env::var("ULTRA_WGPU_INT8").as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        };
        let disable_stage_x = std::env::var("ULTRA_WGPU_STAGE_X").as_deref() == Ok("0");
        let coop_dequant = match std::env::var("ULTRA_WGPU_COOP_DEQUANT").as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        };
        let attn_direct = match std::env::var("ULTRA_WGPU_ATTN_DIRECT").as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        };
        let silu_fusion = std::env::var("ULTRA_WGPU_SILU_FUSION").as_deref() == Ok("1");
        let norm_split = std::env::var("ULTRA_WGPU_NORM_SPLIT").as_deref() == Ok("1");
        let submit_every = std::env::var("ULTRA_WGPU_SUBMIT_EVERY").ok().and_then(|v| v.trim().parse().ok());
        Options {
            attn_direct,
            norm_split,
            submit_every,
            coopmat,
            coop_dequant,
            int8_gemv,
            disable_subgroups: has("subgroups"),
            disable_f16: has("f16"),
            batch_invariant,
            weight_part_bytes,
            disable_solo: has("solo"),
            silu_fusion,
            vec_unroll,
            disable_stage_x,
        }
    }

    /// Every optional feature off: the fallback kernels (f32 GEMVs among them).
    pub fn fallbacks() -> Options {
        Options { disable_subgroups: true, disable_f16: true, int8_gemv: Some(false), ..Options::default() }
    }

    /// These options with silu · up fused into the down GEMV where it can be (`matmul_vec_silu`).
    pub fn with_silu_fusion(self) -> Options {
        Options { silu_fusion: true, ..self }
    }

    /// These options with cooperative matrices never used (the tiled GEMM for prefill).
    pub fn without_coopmat(self) -> Options {
        Options { coopmat: Some(false), ..self }
    }

    /// These options with the quantized GEMV on int8 activations wherever the format allows it.
    pub fn with_int8_gemv(self) -> Options {
        Options { int8_gemv: Some(true), ..self }
    }

    /// These options with split-K attention's first pass reading K and V straight into registers
    /// on every adapter.
    pub fn with_attn_direct(self) -> Options {
        Options { attn_direct: Some(true), ..self }
    }

    /// These options with the int8-writing add + RMSNorm spread over each row's workgroups.
    pub fn with_norm_split(self) -> Options {
        Options { norm_split: true, ..self }
    }

    /// These options with batch invariance kept.
    pub fn invariant(self) -> Options {
        Options { batch_invariant: true, ..self }
    }
}

/// A whole-buffer copy recorded after a flush's dispatches: (src, dst, bytes).
pub type Copy<'a> = (&'a wgpu::Buffer, &'a wgpu::Buffer, u64);

/// A device buffer with a process-unique id (the bind-group cache key).
pub struct GpuBuffer {
    pub(crate) buf: wgpu::Buffer,
    pub(crate) id: u64,
    /// What the host knows of a u32 tensor's values (see `HostMirror`).
    pub(crate) mirror: HostMirror,
}

impl check::HostIndices for GpuBuffer {
    fn host_u32(&self) -> Option<&[u32]> {
        self.mirror.get()
    }
}

/// One dispatch to record: kernel variant, storage buffers (bindings 1, 2, …), parameters
/// (binding 0) and grid.
pub struct Job<'a> {
    pub v: Variant,
    pub bufs: &'a [&'a GpuBuffer],
    pub params: &'a [u32],
    pub groups: [u32; 3],
}

struct Compiled {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

pub(super) struct Dispatch {
    pub(super) v: Variant,
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) bind_group: wgpu::BindGroup,
    pub(super) offset: u32,
    pub(super) groups: [u32; 3],
}

#[derive(Default)]
pub(super) struct State {
    pub(super) pending: Vec<Dispatch>,
    pub(super) params: Vec<u8>,
    bind_groups: HashMap<(Variant, [u64; MAX_BINDINGS]), wgpu::BindGroup>,
    staging: Option<wgpu::Buffer>,
}

pub struct Context {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    /// Subgroup size when subgroup kernels are in use (fixed size, enabled, not disabled).
    pub(crate) subgroup_size: Option<u32>,
    pub(crate) f16: bool,
    /// Cooperative matrices for matmul_coop when `Options::coopmat` allows them and the adapter has them:
    /// (matrix side, subgroup size).
    pub(crate) coop: Option<(u32, u32)>,
    /// Options::coop_dequant, resolved: the fewest weight values (k · n) a cooperative-matrix
    /// matmul runs matmul_coop16 for; None: never.
    pub(crate) coop16_min_values: Option<usize>,
    /// A CPU adapter (SwiftShader, lavapipe; a browser's fallback adapter): the quantized GEMV
    /// runs one-lane teams (matmul.rs).
    pub(crate) cpu_adapter: bool,
    /// Options::batch_invariant: matmul never takes the tiled path.
    pub(crate) batch_invariant: bool,
    /// Options::attn_direct, resolved: split-K attention's first pass is `attention_direct` where
    /// the head fits it.
    pub(crate) attn_direct: bool,
    /// Options::norm_split.
    pub(crate) norm_split: bool,
    /// Options::vec_unroll.
    pub(crate) vec_unroll: Option<u32>,
    /// Not Options::disable_stage_x.
    pub(crate) stage_x: bool,
    /// Options::submit_every.
    submit_every: Option<usize>,
    /// Options::silu_fusion.
    pub(crate) silu_fusion: bool,
    /// Options::int8_gemv, resolved for this adapter: the fewest weight values (k · n, all parts of a
    /// matmuls call together) a GEMV takes int8 activations for; None: never.
    pub(crate) int8_min_values: Option<usize>,
    /// Bytes of the largest weight part (`Options::weight_part_bytes` within the adapter's limits).
    pub(crate) weight_part_bytes: u64,
    arena: wgpu::Buffer,
    arena_stride: u64,
    pipelines: Mutex<HashMap<Variant, Arc<Compiled>>>,
    state: Mutex<State>,
    errors: Arc<Mutex<Vec<String>>>,
    next_id: AtomicU64,
    pub(crate) transfers: AtomicU64,
    /// add_rms_norm_split's per-row counters (`norm_counters`).
    norm_counters: Mutex<Option<Arc<GpuBuffer>>>,
    /// Split-K attention's partials and the cache-copy staging (`scratch`).
    scratch: Mutex<Option<Arc<GpuBuffer>>>,
    /// x as int8 blocks between the kernel that writes them and the GEMVs that read them (`int8_x`).
    int8_x: Mutex<Option<Arc<GpuBuffer>>>,
    /// matmul_coop16's f16 operands between the kernels that write them and the GEMM (`f16_w`, `f16_x`).
    f16_w: Mutex<Option<Arc<GpuBuffer>>>,
    f16_x: Mutex<Option<Arc<GpuBuffer>>>,
    /// A 4-byte buffer for a storage binding a dispatch declares but does not use (matmul_vec_parts
    /// with two weights: its third output).
    pub(crate) unused: GpuBuffer,
    pub(super) profiler: Option<Profiler>,
}

/// The square f16 × f16 → f32 cooperative matrices matmul_coop can use on this adapter (16 × 16
/// before 8 × 8), with its subgroup size, which must be fixed: a matrix belongs to one subgroup and
/// the kernel assigns tiles by subgroup index.
fn coop_shape(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> Option<(u32, u32)> {
    use wgpu::CooperativeScalarType::{F16, F32};
    let sg = info.subgroup_min_size;
    if !adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        || sg != info.subgroup_max_size
        || !(4..=128).contains(&sg)
    {
        return None;
    }
    let props = adapter.cooperative_matrix_properties();
    let has = |s: u32| {
        props.iter().any(|p| p.m_size == s && p.n_size == s && p.k_size == s && p.ab_type == F16 && p.cr_type == F32)
    };
    [16, 8].into_iter().find(|&s| has(s)).map(|s| (s, sg))
}

fn unavailable(reason: impl ToString) -> Error {
    Error::DeviceUnavailable { backend: "wgpu", reason: reason.to_string() }
}

pub(crate) fn device_error(detail: impl ToString) -> Error {
    Error::Device { backend: "wgpu", detail: detail.to_string() }
}

impl Context {
    /// `new_async`, blocking (native: wgpu answers adapter and device requests in place).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(options: Options) -> Result<Context> {
        pollster::block_on(Context::new_async(options))
    }

    /// The best adapter and a device with its full limits (a page's WebGPU answers in a later turn).
    pub async fn new_async(options: Options) -> Result<Context> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(unavailable)?;
        let info = adapter.get_info();
        let available = adapter.features();
        let mut features = wgpu::Features::empty();
        let fixed_subgroup = info.subgroup_min_size == info.subgroup_max_size
            && (4..=128).contains(&info.subgroup_min_size)
            && info.subgroup_min_size.is_power_of_two();
        if available.contains(wgpu::Features::SUBGROUP) && !options.disable_subgroups && fixed_subgroup {
            features |= wgpu::Features::SUBGROUP;
        }
        if available.contains(wgpu::Features::SHADER_F16) && !options.disable_f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        let auto_coop = info.backend == wgpu::Backend::Vulkan
            && matches!(info.device_type, wgpu::DeviceType::DiscreteGpu | wgpu::DeviceType::IntegratedGpu);
        let coop = if options.coopmat.unwrap_or(auto_coop) && features.contains(wgpu::Features::SHADER_F16) {
            coop_shape(&adapter, &info)
        } else {
            None
        };
        if coop.is_some() {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let profile = std::env::var("ULTRA_WGPU_PROFILE").as_deref() == Ok("1")
            && available.contains(wgpu::Features::TIMESTAMP_QUERY);
        if profile {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("ultra"),
                required_features: features,
                required_limits: limits.clone(),
                // SAFETY: a token, not a memory access: wgpu asks callers of its experimental
                // features (here cooperative matrices, requested only where `Options::coopmat`
                // allows them) to acknowledge that they may still have bugs.
                experimental_features: if coop.is_some() {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                ..Default::default()
            })
            .await
            .map_err(unavailable)?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(e.to_string());
        }));
        let arena_stride = (limits.min_uniform_buffer_offset_alignment as u64).max(PARAMS_BYTES);
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params arena"),
            size: ARENA_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let subgroup_size = features.contains(wgpu::Features::SUBGROUP).then_some(info.subgroup_min_size);
        let profiler = profile.then(|| Profiler::new(&device, &queue));
        let unused = GpuBuffer {
            buf: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("unused binding"),
                size: 4,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            }),
            id: u64::MAX, // never a tensor's (theirs count up from 1) nor an empty slot of a cache key (0)
            mirror: HostMirror::default(),
        };
        let cpu_adapter = info.device_type == wgpu::DeviceType::Cpu && !options.disable_solo;
        let submit_every = match options.submit_every {
            Some(n) => (n > 0).then_some(n),
            None => (info.device_type != wgpu::DeviceType::Cpu).then_some(SUBMIT_EVERY),
        };
        let int8_min_values = match options.int8_gemv {
            Some(true) => Some(0),
            Some(false) => None,
            // Not in browsers, where the WGSL goes to the browser's own compiler, and not every one has
            // `dot4I8Packed` (WGSL's packed_4x8_integer_dot_product).
            None => (info.device_type != wgpu::DeviceType::Cpu && info.backend != wgpu::Backend::BrowserWebGpu)
                .then_some(INT8_MIN_VALUES),
        };
        let attn_direct =
            !options.batch_invariant && options.attn_direct.unwrap_or(info.device_type != wgpu::DeviceType::Cpu);
        Ok(Context {
            profiler,
            device,
            queue,
            info,
            f16: features.contains(wgpu::Features::SHADER_F16),
            coop,
            coop16_min_values: match options.coop_dequant {
                Some(true) => Some(0),
                Some(false) => None,
                None => Some(COOP16_MIN_VALUES),
            },
            cpu_adapter,
            batch_invariant: options.batch_invariant,
            attn_direct,
            norm_split: options.norm_split,
            vec_unroll: options.vec_unroll,
            stage_x: !options.disable_stage_x,
            silu_fusion: options.silu_fusion,
            int8_min_values,
            submit_every,
            weight_part_bytes: options
                .weight_part_bytes
                .unwrap_or(u64::MAX)
                .min(limits.max_buffer_size)
                .min(limits.max_storage_buffer_binding_size),
            limits,
            subgroup_size,
            arena,
            arena_stride,
            pipelines: Mutex::default(),
            state: Mutex::default(),
            errors,
            next_id: AtomicU64::new(1),
            transfers: AtomicU64::new(0),
            scratch: Mutex::default(),
            int8_x: Mutex::default(),
            f16_w: Mutex::default(),
            f16_x: Mutex::default(),
            norm_counters: Mutex::default(),
            unused,
        })
    }

    /// A new buffer of `bytes` (at least 4) for storage and copies.
    pub fn buffer(&self, bytes: u64, label: &str) -> Result<GpuBuffer> {
        let size = bytes.max(4).next_multiple_of(4);
        if size > self.limits.max_buffer_size || size > self.limits.max_storage_buffer_binding_size {
            return Err(Error::Unsupported {
                op: "alloc",
                backend: "wgpu",
                detail: format!("{label}: {size} bytes exceeds this adapter's buffer limits"),
            });
        }
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(GpuBuffer { buf, id: self.next_id.fetch_add(1, Ordering::Relaxed), mirror: HostMirror::default() })
    }

    /// A scratch buffer of at least `bytes`, grown (never shrunk) on demand.
    pub fn scratch(&self, bytes: u64) -> Result<Arc<GpuBuffer>> {
        self.grown(&self.scratch, bytes, "scratch")
    }

    /// The buffer of int8 x (at least `bytes`, grown on demand): written by quantize_q8 or
    /// silu_mul_q8 and read by the GEMVs recorded after it, before the next writer.
    pub fn int8_x(&self, bytes: u64) -> Result<Arc<GpuBuffer>> {
        self.grown(&self.int8_x, bytes, "int8 x")
    }

    /// add_rms_norm_split's counters, one u32 per row (at least `rows`): zero on creation, and each
    /// dispatch leaves them zero (a row's last workgroup resets its own).
    pub fn norm_counters(&self, rows: usize) -> Result<Arc<GpuBuffer>> {
        self.grown(&self.norm_counters, (rows * 4) as u64, "norm counters")
    }

    /// The buffer of a weight's rows decoded to f16 for matmul_coop16 (at least `bytes`).
    pub fn f16_w(&self, bytes: u64) -> Result<Arc<GpuBuffer>> {
        self.grown(&self.f16_w, bytes, "f16 weight rows")
    }

    /// The buffer of x in f16 for matmul_coop16 (at least `bytes`).
    pub fn f16_x(&self, bytes: u64) -> Result<Arc<GpuBuffer>> {
        self.grown(&self.f16_x, bytes, "f16 x")
    }

    fn grown(&self, slot: &Mutex<Option<Arc<GpuBuffer>>>, bytes: u64, label: &str) -> Result<Arc<GpuBuffer>> {
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Some(s) if s.buf.size() >= bytes => Ok(s.clone()),
            _ => {
                let s = Arc::new(self.buffer(bytes.next_power_of_two(), label)?);
                *slot = Some(s.clone());
                Ok(s)
            }
        }
    }

    fn compiled(&self, v: Variant) -> Result<Arc<Compiled>> {
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = pipelines.get(&v) {
            return Ok(c.clone());
        }
        let label = v.label();
        // In a page the scope's answer comes in a later turn of the event loop, which a kernel
        // compile cannot wait for: there a bad kernel surfaces through `check_errors` instead.
        #[cfg(not(target_arch = "wasm32"))]
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&label),
            source: wgpu::ShaderSource::Wgsl(v.source().into()),
        });
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            count: None,
        }];
        for (i, &writes) in v.writes().iter().enumerate() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: !writes },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(&label), entries: &entries });
        let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(v.kernel.stem()),
            compilation_options: Default::default(),
            cache: None,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(err) = pollster::block_on(scope.pop()) {
            return Err(Error::KernelCompile { kernel: label, log: err.to_string() });
        }
        let compiled = Arc::new(Compiled { pipeline, layout });
        pipelines.insert(v, compiled.clone());
        Ok(compiled)
    }

    /// Records one dispatch of `v` over `bufs` (bindings 1, 2, …) with `params` (binding 0).
    pub fn dispatch(&self, v: Variant, bufs: &[&GpuBuffer], params: &[u32], groups: [u32; 3]) -> Result<()> {
        self.dispatch_all(&[Job { v, bufs, params, groups }])
    }

    /// Records `jobs` back to back under one lock, so an op's dispatches that share a scratch
    /// buffer are never interleaved with another thread's (wgpu orders the dispatches of one pass
    /// with barriers wherever one writes what a later one reads).
    pub fn dispatch_all(&self, jobs: &[Job]) -> Result<()> {
        let max = self.limits.max_compute_workgroups_per_dimension;
        let mut compiled = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.groups.iter().any(|&g| g > max) {
                return Err(Error::Unsupported {
                    op: job.v.kernel.stem(),
                    backend: "wgpu",
                    detail: format!("grid {:?} exceeds {max} workgroups per dimension", job.groups),
                });
            }
            compiled.push(self.compiled(job.v)?);
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for (job, compiled) in jobs.iter().zip(&compiled) {
            if job.groups.contains(&0) {
                continue;
            }
            self.record(&mut state, job, compiled)?;
        }
        Ok(())
    }

    fn record(&self, state: &mut State, job: &Job, compiled: &Compiled) -> Result<()> {
        if job.params.len() as u64 * 4 > PARAMS_BYTES {
            let detail = format!("{} parameter words (at most {})", job.params.len(), PARAMS_BYTES / 4);
            return Err(Error::Unsupported { op: job.v.kernel.stem(), backend: "wgpu", detail });
        }
        if state.params.len() as u64 + self.arena_stride > ARENA_BYTES {
            self.flush_locked(state, &[])?;
        }
        let offset = state.params.len();
        state.params.extend(job.params.iter().flat_map(|p| p.to_le_bytes()));
        state.params.resize(offset + self.arena_stride as usize, 0);
        if state.bind_groups.len() > MAX_BIND_GROUPS {
            state.bind_groups.clear();
        }
        let mut ids = [0u64; MAX_BINDINGS];
        for (id, b) in ids.iter_mut().zip(job.bufs) {
            *id = b.id;
        }
        let key = (job.v, ids);
        let bind_group = match state.bind_groups.get(&key) {
            Some(bg) => bg.clone(),
            None => {
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &self.arena,
                        offset: 0,
                        size: wgpu::BufferSize::new(PARAMS_BYTES),
                    }),
                }];
                for (i, b) in job.bufs.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.buf.as_entire_binding() });
                }
                let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(job.v.kernel.stem()),
                    layout: &compiled.layout,
                    entries: &entries,
                });
                state.bind_groups.insert(key, bg.clone());
                bg
            }
        };
        let pipeline = compiled.pipeline.clone();
        state.pending.push(Dispatch { v: job.v, pipeline, bind_group, offset: offset as u32, groups: job.groups });
        if self.submit_every.is_some_and(|n| state.pending.len() >= n) {
            // Later dispatches see this one's writes: wgpu orders submissions like passes.
            self.flush_locked(state, &[])?;
        }
        Ok(())
    }

    /// Submits the pending dispatches as one command buffer, with whole-buffer copies
    /// (src, dst, bytes) after them.
    pub fn flush(&self, copies: &[Copy]) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.flush_locked(&mut state, copies)
    }

    fn flush_locked(&self, state: &mut State, copies: &[Copy]) -> Result<()> {
        if state.pending.is_empty() && copies.is_empty() {
            return Ok(());
        }
        if !state.params.is_empty() {
            self.queue.write_buffer(&self.arena, 0, &state.params);
        }
        let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("ultra") });
        if let Some(p) = &self.profiler {
            return self.flush_profiled(p, state, encoder, copies);
        }
        if !state.pending.is_empty() {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            for d in &state.pending {
                pass.set_pipeline(&d.pipeline);
                pass.set_bind_group(0, &d.bind_group, &[d.offset]);
                pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
            }
        }
        for &(src, dst, bytes) in copies {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
        }
        self.queue.submit([encoder.finish()]);
        state.pending.clear();
        state.params.clear();
        self.check_errors()
    }

    /// flush_locked with each dispatch in its own timed pass; waits and adds the times up.
    fn flush_profiled(
        &self,
        p: &Profiler,
        state: &mut State,
        mut encoder: wgpu::CommandEncoder,
        copies: &[Copy],
    ) -> Result<()> {
        let timed = state.pending.len().min(PROFILED);
        for (i, d) in state.pending.iter().enumerate() {
            let writes = (i < timed).then(|| wgpu::ComputePassTimestampWrites {
                query_set: &p.queries,
                beginning_of_pass_write_index: Some(2 * i as u32),
                end_of_pass_write_index: Some(2 * i as u32 + 1),
            });
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: writes });
            pass.set_pipeline(&d.pipeline);
            pass.set_bind_group(0, &d.bind_group, &[d.offset]);
            pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
        }
        let bytes = (timed * 16) as u64;
        if timed > 0 {
            encoder.resolve_query_set(&p.queries, 0..2 * timed as u32, &p.resolve, 0);
            encoder.copy_buffer_to_buffer(&p.resolve, 0, &p.readback, 0, bytes);
        }
        for &(src, dst, bytes) in copies {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
        }
        self.queue.submit([encoder.finish()]);
        let labels: Vec<String> = state.pending[..timed].iter().map(|d| d.v.label()).collect();
        state.pending.clear();
        state.params.clear();
        if timed > 0 {
            let slice = p.readback.slice(..bytes);
            slice.map_async(wgpu::MapMode::Read, |_| {});
            self.wait()?;
            let stamps: Vec<u64> = bytemuck::cast_slice(&slice.get_mapped_range().map_err(device_error)?).to_vec();
            p.readback.unmap();
            let mut totals = p.totals.lock().unwrap_or_else(|e| e.into_inner());
            for (label, t) in labels.into_iter().zip(stamps.chunks_exact(2)) {
                totals.add(label, t[1].saturating_sub(t[0]) as f64 * p.period_ns, 0);
            }
        }
        self.check_errors()
    }

    /// Any error wgpu reported since the last check, as a value.
    pub fn check_errors(&self) -> Result<()> {
        let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if errors.is_empty() {
            return Ok(());
        }
        let detail = errors.join("; ");
        errors.clear();
        Err(device_error(detail))
    }

    /// Waits for all submitted work.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: Some(WAIT_LIMIT) })
            .map_err(|e| device_error(format!("waiting for the GPU: {e}")))?;
        self.check_errors()
    }

    /// Copies the first `out.len()` bytes of `src` to the host after all queued work.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_bytes(&self, src: &GpuBuffer, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return self.flush(&[]).and_then(|_| self.wait());
        }
        let (staging, submitted) = self.copy_to_staging(src, out.len() as u64);
        let result = submitted.and_then(|_| {
            let (tx, rx) = std::sync::mpsc::channel();
            staging.slice(..out.len() as u64).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            self.wait()?;
            rx.recv().map_err(device_error)?.map_err(device_error)?;
            take_mapped(&staging, out)
        });
        self.state.lock().unwrap_or_else(|p| p.into_inner()).staging = Some(staging);
        result
    }

    /// `read_bytes`, awaiting the map: in a page the browser maps the buffer in a later turn of
    /// the event loop, and blocking the thread for it would wait forever.
    #[cfg(target_arch = "wasm32")]
    pub async fn read_bytes_async(&self, src: &GpuBuffer, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return self.flush(&[]);
        }
        let (staging, submitted) = self.copy_to_staging(src, out.len() as u64);
        let result = match submitted {
            Ok(()) => {
                let (tx, rx) = super::web::oneshot();
                staging.slice(..out.len() as u64).map_async(wgpu::MapMode::Read, move |r| tx.send(r));
                match rx.await {
                    Ok(()) => self.check_errors().and_then(|_| take_mapped(&staging, out)),
                    // A failed map usually follows a device error: report that one.
                    Err(e) => Err(self.check_errors().err().unwrap_or_else(|| device_error(e))),
                }
            }
            Err(e) => Err(e),
        };
        self.state.lock().unwrap_or_else(|p| p.into_inner()).staging = Some(staging);
        result
    }

    /// Submits the pending work and a copy of `src[..bytes]` into a mappable staging buffer (the
    /// kept one when it is large enough), which comes back whether or not the submission failed.
    fn copy_to_staging(&self, src: &GpuBuffer, bytes: u64) -> (wgpu::Buffer, Result<()>) {
        self.transfers.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let staging = match state.staging.take() {
            Some(s) if s.size() >= bytes => s,
            _ => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: bytes.next_power_of_two().max(256),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        let submitted = self.flush_locked(&mut state, &[(&src.buf, &staging, bytes)]);
        (staging, submitted)
    }

    /// Writes `data` at the start of `dst`, after the work recorded so far.
    pub fn write_bytes(&self, dst: &GpuBuffer, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.transfers.fetch_add(1, Ordering::Relaxed);
        // queue.write_buffer lands before the next submission's commands: submit earlier ones first.
        self.flush(&[])?;
        self.queue.write_buffer(&dst.buf, 0, data);
        Ok(())
    }

    /// A 1D grid of `n` threads in 256-thread groups, folded into 2D past the per-dimension limit.
    pub fn grid_1d(&self, n: usize) -> [u32; 3] {
        let groups = n.div_ceil(256) as u32;
        let max = self.limits.max_compute_workgroups_per_dimension;
        if groups <= max { [groups, 1, 1] } else { [max, groups.div_ceil(max), 1] }
    }
}

/// Copies the mapped `staging[..out.len()]` out and unmaps it.
fn take_mapped(staging: &wgpu::Buffer, out: &mut [u8]) -> Result<()> {
    out.copy_from_slice(&staging.slice(..out.len() as u64).get_mapped_range().map_err(device_error)?);
    staging.unmap();
    Ok(())
}

impl Drop for Context {
    fn drop(&mut self) {
        let Some(p) = &self.profiler else { return };
        p.totals.lock().unwrap_or_else(|e| e.into_inner()).print("wgpu", "timed dispatches");
    }
}
